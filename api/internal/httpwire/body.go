package httpwire

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ratelimitd/ratelimitd/table"
)

// The POST body parser reads the body once, into one string, and walks it
// byte by byte, answering as encoding/json's token-streaming Decoder reading
// it token by token would (refParseJSON in the tests, which FuzzParseBody
// holds it to): every answer, error messages and offsets included, found at
// the same point of the input. It reads the common tokens (delimiters,
// strings, numbers, literals) itself and hands anything else (a nested
// value, a malformed one, one cut off by the end of the body) to
// encoding/json where the Decoder would read it, so that those errors stay
// encoding/json's. It allocates the body string (and a batch's slice when
// the one reused is too small) and nothing per check unless a string holds
// escapes or invalid UTF-8: the strings of its result are slices of the
// body, which stay valid after the request (package table clones the ids it
// keeps, so a bucket does not pin a body). The body is read whole, up to
// MaxBodyBytes, before it is parsed: an error early in a body is answered
// once the rest has arrived.

// readJSON reads a POST body, at most MaxBodyBytes, and parses it with
// parseBody, a batch into the memory of batch if it is large enough.
func (rs *Responder) readJSON(w http.ResponseWriter, r *http.Request, m Mode, batch []Params) (Body, error) {
	body := http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	defer body.Close()
	p := rs.getBuf()
	b, err := readBody(body, *p, r.ContentLength)
	s := string(b)
	*p = b
	rs.putBuf(p)
	return parseBody(s, err, m, batch)
}

// readBody appends what r gives to b, up to its end or its first error,
// which it returns (nil for io.EOF). size is the length of the body if
// known, else -1: b grows to hold up to maxPooledBuf bytes of it at once,
// and beyond that only as they arrive.
func readBody(r io.Reader, b []byte, size int64) ([]byte, error) {
	if size > 0 {
		b = slices.Grow(b, int(min(size, maxPooledBuf))+1)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // room for the next read, or for io.EOF
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// bodyParser parses one POST body.
type bodyParser struct {
	s string // the body, or as much of it as could be read
	i int    // the next byte of s to read
	// scanned counts the bytes of the keys and values read so far, white
	// space after a colon included: the offset encoding/json's Decoder
	// gives in a syntax error within a key or value is that count plus the
	// bytes of the key or value up to the error.
	scanned int
	// end is what the end of s means: nil for the end of the body, else the
	// error that ended reading it (such as *http.MaxBytesError).
	end error
	m   Mode
}

// parseBody parses s, a POST body read to its end (end == nil) or up to
// the error end, as a JSON object with the members of the query
// parameters of m or, for modeCheck only, a JSON array of 1 to
// table.MaxBatch such objects. Any error is a *table.FieldError; an
// error in an element of an array names it, as in "checks[3].limit". A
// check the Checker will refuse (see params.tableErr) is not an error here,
// unless an error follows it: then its fault is the one reported.
// Member names are matched exactly (case-sensitively), each at most once.
// An error reading the body counts only where the parse needs what follows
// s: a body whose parse fails within s gets that failure. A batch is
// appended to batch[:0], which is reallocated only if too small.
func parseBody(s string, end error, m Mode, batch []Params) (Body, error) {
	p := bodyParser{s: s, end: end, m: m}
	msg := MsgObject
	if m == ModeCheck {
		msg = msgBody
	}
	var out Body
	var err error
	c, ok := p.peek()
	switch {
	case !ok:
		return Body{}, BodyErr(end, msg)
	case c == '{':
		p.i++
		err = p.object(&out.One)
	case c == '[' && m == ModeCheck:
		p.i++
		if out.Batch, err = p.array(batch[:0]); err != nil {
			return Body{}, FirstFault(out.Batch, true, err)
		}
	default:
		err = p.notObject(c, FieldErr("body", msg), msg)
	}
	if err != nil {
		return Body{}, err
	}
	if c, ok = p.peek(); ok {
		err = p.notObject(c, FieldErr("body", MsgTrailing), MsgTrailing)
	} else if end != nil {
		err = BodyErr(end, MsgTrailing)
	}
	if err != nil {
		if out.Batch != nil {
			return Body{}, FirstFault(out.Batch, true, err)
		}
		return Body{}, FirstFault([]Params{out.One}, false, err)
	}
	return out, nil
}

// Contexts of the syntax errors about an unexpected token, as
// encoding/json words them after "invalid character 'c'".
const (
	ctxValue   = " looking for beginning of value"
	ctxElement = " after array element"
	ctxKey     = " looking for beginning of object key string"
	ctxMember  = " after object key:value pair"
	ctxFirst   = "" // where the first key of an object should be: none (the Decoder's tokenError has no case for it)
)

// array parses the elements of a JSON array whose '[' has just been read,
// through its closing ']', appending them to ps. On an error it returns
// the elements parsed whole before it.
func (p *bodyParser) array(ps []Params) ([]Params, error) {
	// At most one check per '{': ps grows at most once.
	if n := min(strings.Count(p.s[p.i:], "{"), table.MaxBatch); cap(ps) < n {
		ps = make([]Params, 0, n)
	}
	for {
		c, ok := p.peek()
		if !ok || c == ']' || c == '}' {
			break
		}
		i := len(ps)
		if i == table.MaxBatch {
			return ps, FieldErr("checks", msgChecks)
		}
		if i > 0 {
			if c != ',' {
				return ps, p.tokenErr(ctxElement)
			}
			p.i++
			if c, ok = p.peek(); !ok {
				return ps, BodyErr(p.end, MsgTruncated)
			}
		}
		if c != '{' {
			return ps, p.notObject(c, FieldErr(elemField(i, ""), MsgObject), MsgTruncated)
		}
		p.i++
		ps = append(ps, Params{})
		if err := p.object(&ps[i]); err != nil {
			return ps[:i], ElemErr(i, err)
		}
	}
	c, ok := p.peek() // the closing ']'
	switch {
	case !ok:
		return ps, BodyErr(p.end, MsgTruncated)
	case c == '}' && len(ps) == 0:
		return ps, p.tokenErr(ctxValue)
	case c == '}':
		return ps, p.tokenErr(ctxElement)
	}
	p.i++
	if len(ps) == 0 {
		return ps, FieldErr("checks", msgChecks)
	}
	return ps, nil
}

// object parses the members of a JSON object whose '{' has just been read,
// through its closing '}', into out.
func (p *bodyParser) object(out *Params) error {
	*out = newParams(p.m)
	allowed := p.m.Params()
	first := true
	for {
		c, ok := p.peek()
		if !ok || c == '}' || c == ']' {
			break
		}
		switch {
		case first && c != '"':
			return p.tokenErr(ctxFirst)
		case !first && c != ',':
			return p.tokenErr(ctxMember)
		case !first:
			p.i++
			if c, ok = p.peek(); !ok {
				return BodyErr(p.end, MsgTruncated)
			}
			if c != '"' {
				return p.tokenErr(ctxKey)
			}
		}
		first = false
		key, err := p.key()
		if err != nil {
			return err
		}
		bit := fieldBit(key) & allowed
		switch {
		case key == "":
			return FieldErr("body", MsgNoMemberName)
		case bit == 0:
			return FieldErr(EchoName(key), msgUnknown)
		}
		if out.seen&bit != 0 {
			return FieldErr(key, MsgRepeated)
		}
		out.seen |= bit
		if c, ok = p.peek(); !ok {
			return BodyErr(p.end, MsgTruncated)
		}
		if c != ':' {
			return malformed(p.i, "expected colon after object key")
		}
		p.i++
		raw, plain, err := p.value()
		if err != nil {
			return err
		}
		if err := out.setJSON(bit, key, raw, plain, p.m); err != nil {
			return err
		}
	}
	c, ok := p.peek() // the closing '}'
	switch {
	case !ok:
		return BodyErr(p.end, MsgTruncated)
	case c == ']' && first:
		return p.tokenErr(ctxFirst)
	case c == ']':
		return p.tokenErr(ctxMember)
	}
	p.i++
	return out.finish(p.m)
}

// key reads the member name that starts at p.i and returns its value.
func (p *bodyParser) key() (string, error) {
	start := p.i
	end, plain, ok := p.scalar(start)
	if !ok {
		var key string
		n, err := p.decode(start, &key)
		if err != nil {
			return "", p.decodeErr(err, MsgTruncated)
		}
		p.i = start + n
		p.scanned += n
		return key, nil
	}
	p.i = end
	p.scanned += end - start
	return unquote(p.s[start:end], plain), nil
}

// value reads the member value that follows the ':' just read and returns
// its JSON text, and whether it is plain (see scalar).
func (p *bodyParser) value() (raw string, plain bool, err error) {
	start := p.i
	p.peek() // the white space is part of the value, for p.scanned
	end, plain, ok := p.scalar(p.i)
	if !ok {
		var v json.RawMessage
		n, err := p.decode(start, &v)
		if err != nil {
			return "", false, p.decodeErr(err, MsgTruncated)
		}
		p.i = start + n
		p.scanned += n
		return string(v), false, nil
	}
	raw = p.s[p.i:end]
	p.i = end
	p.scanned += end - start
	return raw, plain, nil
}

// notObject returns the error for the token c at p.i, where the Decoder
// reads a value and wants '{': okErr if c is well formed, else the error
// reading it, with msg for an error about the body as a whole.
func (p *bodyParser) notObject(c byte, okErr error, msg string) error {
	switch c {
	case '{', '[':
		return okErr
	case ']', '}', ',', ':':
		return p.tokenErr(ctxValue)
	}
	var v any
	if _, err := p.decode(p.i, &v); err != nil {
		return p.decodeErr(err, msg)
	}
	return okErr
}

// peek skips white space and returns the byte at p.i; ok is false at the
// end of s.
func (p *bodyParser) peek() (c byte, ok bool) {
	for ; p.i < len(p.s); p.i++ {
		switch c = p.s[p.i]; c {
		case ' ', '\t', '\n', '\r':
		default:
			return c, true
		}
	}
	return 0, false
}

// scalar returns the end of the JSON string, number or literal at i, and
// whether it is plain: anything but a string holding an escape or a byte
// over 0x7f. ok is false when there is none, or it is malformed, or it ends
// s while reading the body failed: encoding/json needs the byte after a
// scalar to end it.
func (p *bodyParser) scalar(i int) (end int, plain, ok bool) {
	s := p.s
	if i == len(s) {
		return i, false, false
	}
	plain = true
	switch c := s[i]; {
	case c == '"':
		end, plain, ok = scanString(s, i)
	case c == '-' || '0' <= c && c <= '9':
		end, ok = scanNumber(s, i)
	case c == 't':
		end, ok = scanLiteral(s, i, "true")
	case c == 'f':
		end, ok = scanLiteral(s, i, "false")
	case c == 'n':
		end, ok = scanLiteral(s, i, "null")
	}
	return end, plain, ok && (end < len(s) || p.end == nil)
}

// decode has encoding/json read one JSON value into v from byte i on, as
// the Decoder reads it there (same errors, same offsets in them), and
// returns the number of bytes it read.
func (p *bodyParser) decode(i int, v any) (int, error) {
	var r io.Reader = strings.NewReader(p.s[i:])
	if p.end != nil {
		r = io.MultiReader(r, errReader{p.end})
	}
	dec := json.NewDecoder(r)
	err := dec.Decode(v)
	return int(dec.InputOffset()), err
}

// decodeErr is bodyErr for an error of decode, whose syntax errors count
// their offset from where decode began: it adds p.scanned, as the Decoder
// counts from the start of the body.
func (p *bodyParser) decodeErr(err error, msg string) error {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return malformed(p.scanned+int(syntax.Offset), syntax.Error())
	}
	return BodyErr(err, msg)
}

// errReader is an io.Reader that always fails with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// tokenErr returns the syntax error about the unexpected byte at p.i, with
// the context of the decoder's state.
func (p *bodyParser) tokenErr(context string) error {
	return malformed(p.i, "invalid character "+quoteChar(p.s[p.i])+context)
}

// malformed returns the error about a syntax error at byte offset.
func malformed(offset int, msg string) error {
	return FieldErr("body", "is malformed JSON at byte "+strconv.Itoa(offset)+": "+msg)
}

// quoteChar formats c as encoding/json does in its syntax errors.
func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}

// scanString returns the end of the well-formed JSON string at s[i] ('"'),
// and whether it is plain: without escapes, all ASCII. ok is false if there
// is none. Any byte from 0x20 up is accepted, as encoding/json does:
// invalid UTF-8 is replaced when the string is decoded (an id is refused
// instead, by unicodeMsg).
func scanString(s string, i int) (end int, plain, ok bool) {
	plain = true
	for i++; i < len(s); i++ {
		c := s[i]
		if 0x20 <= c && c < utf8.RuneSelf && c != '"' && c != '\\' {
			continue
		}
		switch {
		case c == '"':
			return i + 1, plain, true
		case c < 0x20:
			return i, false, false
		case c >= utf8.RuneSelf:
			plain = false
			continue
		}
		plain = false // a '\\'
		if i++; i == len(s) {
			return i, false, false
		}
		switch s[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			for range 4 {
				if i++; i == len(s) || !isHex(s[i]) {
					return i, false, false
				}
			}
		default:
			return i, false, false
		}
	}
	return i, false, false
}

// isHex reports whether c is a hexadecimal digit.
func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// scanNumber returns the end of the JSON number at s[i]; ok is false if it
// is malformed or cut short by the end of s.
func scanNumber(s string, i int) (end int, ok bool) {
	if s[i] == '-' {
		i++
	}
	switch {
	case i == len(s):
		return i, false
	case s[i] == '0':
		i++
	case '1' <= s[i] && s[i] <= '9':
		i = skipDigits(s, i+1)
	default:
		return i, false
	}
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := skipDigits(s, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

// skipDigits returns the index of the first byte from i on that is not an
// ASCII digit.
func skipDigits(s string, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// scanLiteral returns the end of lit at s[i]; ok is false if it is not
// there whole.
func scanLiteral(s string, i int, lit string) (end int, ok bool) {
	if strings.HasPrefix(s[i:], lit) {
		return i + len(lit), true
	}
	return i, false
}

// unicodeMsg returns what raw, a well-formed JSON string, breaks by
// not decoding to valid UTF-8: table.MsgUTF8 for bytes that are not UTF-8,
// msgIDSurrogate for a \uXXXX escape of a surrogate that is not the first
// half of a pair followed by its second; "" when it decodes to valid UTF-8.
func unicodeMsg(raw string) string {
	if !utf8.ValidString(raw) {
		return table.MsgUTF8
	}
	for i := 1; i < len(raw)-1; {
		j := strings.IndexByte(raw[i:len(raw)-1], '\\')
		if j < 0 {
			break
		}
		i += j
		if raw[i+1] != 'u' {
			i += 2 // a one-letter escape, \\ included
			continue
		}
		switch r := hex4(raw[i+2 : i+6]); {
		case r < 0xd800 || r > 0xdfff:
			i += 6
		case r < 0xdc00 && strings.HasPrefix(raw[i+6:], `\u`) && isLowSurrogate(hex4(raw[i+8:i+12])):
			i += 12
		default:
			return msgIDSurrogate
		}
	}
	return ""
}

// isLowSurrogate reports whether r is the second half of a surrogate pair.
func isLowSurrogate(r rune) bool { return 0xdc00 <= r && r <= 0xdfff }

// hex4 returns the value of s, four hexadecimal digits.
func hex4(s string) rune {
	var r rune
	for i := range 4 {
		c := s[i]
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// unquote returns the value of raw, a well-formed JSON string (plain if
// scanString says so): raw itself without its quotes when it holds no
// escape and is valid UTF-8, else what encoding/json decodes it to.
func unquote(raw string, plain bool) string {
	if plain || strings.IndexByte(raw, '\\') < 0 && utf8.ValidString(raw) {
		return raw[1 : len(raw)-1]
	}
	var s string
	_ = json.Unmarshal([]byte(raw), &s) // cannot fail on a well-formed string
	return s
}
