package httpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ratelimitd/ratelimitd/table"
)

// parseJSON reads r to its end, or to its first error, and parses what it
// read with parseBody, as readJSON does with a request body.
func parseJSON(r io.Reader, m Mode) (Body, error) {
	b, err := readBody(r, nil, -1)
	return parseBody(string(b), err, m, nil)
}

// The reference: a parser over encoding/json's token-streaming Decoder,
// the specification FuzzParseBody holds parseBody to, answers and error
// messages included.

func refParseJSON(r io.Reader, m Mode) (Body, error) {
	dec := json.NewDecoder(r)
	msg := MsgObject
	if m == ModeCheck {
		msg = msgBody
	}
	tok, err := dec.Token()
	if err != nil {
		return Body{}, BodyErr(err, msg)
	}
	var out Body
	switch d, _ := tok.(json.Delim); {
	case d == '{':
		if out.One, err = refParseObject(dec, m); err != nil {
			return Body{}, err
		}
	case d == '[' && m == ModeCheck:
		if out.Batch, err = refParseArray(dec, m); err != nil {
			return Body{}, err
		}
	default:
		return Body{}, FieldErr("body", msg)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Body{}, BodyErr(err, MsgTrailing)
	}
	return out, nil
}

func refParseArray(dec *json.Decoder, m Mode) ([]Params, error) {
	var ps []Params
	for dec.More() {
		i := len(ps)
		if i == table.MaxBatch {
			return nil, FieldErr("checks", msgChecks)
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, BodyErr(err, MsgTruncated)
		}
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return nil, FieldErr(elemField(i, ""), MsgObject)
		}
		p, err := refParseObject(dec, m)
		if err != nil {
			return nil, ElemErr(i, err)
		}
		ps = append(ps, p)
	}
	if _, err := dec.Token(); err != nil {
		return nil, BodyErr(err, MsgTruncated)
	}
	if len(ps) == 0 {
		return nil, FieldErr("checks", msgChecks)
	}
	return ps, nil
}

func refParseObject(dec *json.Decoder, m Mode) (Params, error) {
	p := newParams(m)
	allowed := m.Params()
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Params{}, BodyErr(err, MsgTruncated)
		}
		key, ok := tok.(string)
		if !ok {
			return Params{}, FieldErr("body", MsgObject)
		}
		bit := fieldBit(key) & allowed
		switch {
		case key == "":
			return Params{}, FieldErr("body", MsgNoMemberName)
		case bit == 0:
			return Params{}, FieldErr(EchoName(key), msgUnknown)
		}
		if p.seen&bit != 0 {
			return Params{}, FieldErr(key, MsgRepeated)
		}
		p.seen |= bit
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Params{}, BodyErr(err, MsgTruncated)
		}
		if err := refSetJSON(&p, bit, key, raw, m); err != nil {
			return Params{}, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return Params{}, BodyErr(err, MsgTruncated)
	}
	if err := p.finish(m); err != nil {
		return Params{}, err
	}
	// The reference validates each object whole where it ends.
	if err := p.tableErr(); err != nil {
		return Params{}, err
	}
	return p, nil
}

func refSetJSON(p *Params, bit uint, key string, raw json.RawMessage, m Mode) error {
	switch bit {
	case seenID, seenAlgorithm, seenRule:
		s, err := JSONString(raw, key)
		if err != nil {
			return err
		}
		if rule := refUnicodeMsg(raw); bit == seenID && rule != "" {
			return FieldErr("id", rule)
		}
		return p.set(bit, s, m)
	case seenScale:
		if len(raw) > 0 && raw[0] == '"' {
			s, err := JSONString(raw, key)
			if err != nil {
				return err
			}
			return p.set(bit, s, m)
		}
		if !isDigits(string(raw)) {
			return FieldErr("scale", msgScale)
		}
	}
	return p.set(bit, string(raw), m)
}

// refUnicodeMsg is what the reference finds of an id's encoding, another
// way than the parser: raw, a JSON string, must be valid UTF-8, and
// the UTF-16 code units it spells, its escapes decoded one by one, must pair
// every surrogate.
func refUnicodeMsg(raw json.RawMessage) string {
	if !utf8.Valid(raw) {
		return table.MsgUTF8
	}
	var units []uint16
	for s := string(raw[1 : len(raw)-1]); s != ""; {
		switch {
		case s[0] == '\\' && s[1] == 'u':
			u, err := strconv.ParseUint(s[2:6], 16, 16)
			if err != nil {
				panic(err) // raw is well formed
			}
			units, s = append(units, uint16(u)), s[6:]
		case s[0] == '\\':
			units, s = append(units, uint16(s[1])), s[2:] // a one-letter escape: never a surrogate
		default:
			r, n := utf8.DecodeRuneInString(s)
			units, s = utf16.AppendRune(units, r), s[n:]
		}
	}
	for i := 0; i < len(units); i++ {
		if u := rune(units[i]); utf16.IsSurrogate(u) {
			if i+1 == len(units) || utf16.DecodeRune(u, rune(units[i+1])) == utf8.RuneError {
				return msgIDSurrogate
			}
			i++
		}
	}
	return ""
}

// sameParse reports how got and gotErr differ from want and wantErr, or "".
func sameParse(got Body, gotErr error, want Body, wantErr error) string {
	switch {
	case (gotErr == nil) != (wantErr == nil):
		return "got error " + errString(gotErr) + ", want " + errString(wantErr)
	case gotErr != nil:
		var fe *table.FieldError
		if !errors.As(gotErr, &fe) {
			return fmt.Sprintf("got error %q of type %T, want a *table.FieldError", gotErr, gotErr)
		}
		if gotErr.Error() != wantErr.Error() {
			return "got error " + strconv.Quote(gotErr.Error()) + ", want " + strconv.Quote(wantErr.Error())
		}
		return ""
	case (got.Batch == nil) != (want.Batch == nil):
		return "got batch " + strconv.FormatBool(got.Batch != nil) + ", want " + strconv.FormatBool(want.Batch != nil)
	case got.One != want.One:
		return "got one check " + strconv.Quote(paramsString(got.One)) + ", want " + strconv.Quote(paramsString(want.One))
	case len(got.Batch) != len(want.Batch):
		return "got " + strconv.Itoa(len(got.Batch)) + " checks, want " + strconv.Itoa(len(want.Batch))
	}
	for i := range got.Batch {
		if got.Batch[i] != want.Batch[i] {
			return "check " + strconv.Itoa(i) + ": got " + strconv.Quote(paramsString(got.Batch[i])) + ", want " + strconv.Quote(paramsString(want.Batch[i]))
		}
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "none"
	}
	return strconv.Quote(err.Error())
}

func paramsString(p Params) string {
	b, _ := json.Marshal(struct {
		Req  table.Request
		Rule string
		Seen uint
	}{p.Req, p.Rule, p.seen})
	return string(b)
}

// tooLarge is what http.MaxBytesReader fails with past MaxBodyBytes.
var tooLarge = &http.MaxBytesError{Limit: MaxBodyBytes}

// cutReader returns a reader of body that, if cut, fails with tooLarge at
// its end, as the reader of a body longer than MaxBodyBytes does after
// MaxBodyBytes bytes.
func cutReader(body []byte, cut bool) io.Reader {
	if !cut {
		return bytes.NewReader(body)
	}
	return io.MultiReader(bytes.NewReader(body), errReader{tooLarge})
}

// bodySeeds are bodies for FuzzParseBody beyond those of the other tests.
var bodySeeds = []string{
	`[{"id":"a","scale":"1h","limit":1e400}]`,
	`[1e400]`,
	`{"id":"a","scale":1000,"limit":3} 1e400`,
	`1e400`,
	`{"id":"a","scale":1000,"limit":3}` + "\n\t\r ",
	`{"id":"\ud800","scale":1000,"limit":3}`,
	`{"\u0069d":"a","scale":1000,"limit":3}`,
	`{"i\u0064":"a","i\u0064":"b"}`,
	"{\"\xff\":1}",
	"{\"id\":\"a\",\"scale\":1000,\"limit\":3 \xff}",
	`{"id":"a","scale":[[[[1]]]],"limit":3}`,
	`{"id":"a","scale":{"a":[1,{"b":null}]},"limit":3}`,
	`{"id":"a","scale":[1,,2],"limit":3}`,
	`{"id":"a","scale":1000,"limit":3,"hits":-}`,
	`{"id":"a","scale":1000,"limit":3,"hits":1.}`,
	`{"id":"a","scale":1000,"limit":3,"hits":1e+}`,
	`{"id":"a","scale":1000,"limit":3,"hits":tru}`,
	`{"id":"a","scale":1000,"limit":3,"hits":truex}`,
	`{"id":"a","scale":1000,"limit":3,"hits":0x10}`,
	`{"id":"a\x","scale":1000,"limit":3}`,
	`{"id":"a\u00","scale":1000,"limit":3}`,
	"{\"id\":\"a\x01\",\"scale\":1000,\"limit\":3}",
	`{,}`,
	`{]`,
	`{"id":"a",]`,
	`{"id" 1}`,
	`{"id":"a" "scale":1}`,
	`[,]`,
	`[}`,
	`[{"id":"a","scale":1000,"limit":3}}`,
	`[{"id":"a","scale":1000,"limit":3} {}]`,
	`[{"id":"a","scale":1000,"limit":3},}`,
	`[{"id":"a","scale":1000,"limit":3},"x"]`,
	`[{"id":"a","scale":1000,"limit":3},:]`,
	`[{"id":"a","scale":1000,"limit":3},`,
	`{"id":"a","scale":1000,"limit":3}]`,
	`{"id":"a","scale":1000,"limit":3}:`,
	`{"id":"a","scale":1000,"limit":3} "x`,
	`{"id":"a","scale":1000,"limit":3} tru`,
	`{"id":"a","scale":1000,"limit":3} 5`,
	`"x`,
	`'x'`,
	`]`,
	`-`,
	`{"id":"a","scale":1000,"limit":`,
	`{"id":"a","scale":1000,"limit":3`,
	`{"id":"a","scale":1000,"limit":"3`,
	`{"id":"a","scale":1000,"limit":3,`,
	`{"id":"a","scale":1000,"limit":3,"`,
	`{"id":"a","scale":1000,"limit":3,"x`,
	`{"id":"a","scale":1000,"limit":3,"x"`,
	`{"id":"a","scale":1000,"limit":3,"hits"`,
	`{"id":"a","scale":1000,"limit":3,"hits" `,
	`{"id":"a","scale":1000,"limit":3,"hits":`,
	`{"id":"a","scale":1000,"limit":3,"hits": `,
	`{"id":"a","scale":"1s","limit":3,"hits":true}`,
	`{"id":"a","scale":"1s","limit":3,"algorithm":"sliding_window","burst":2}`,
	`{"id":"a","rule":"x","hits":-1}`,
	`{"id":"` + strings.Repeat("é", 600) + `","scale":1000,"limit":3}`,
	`{"` + strings.Repeat("k", 200) + `":1}`,
	`{"id":"\udc00","scale":1000,"limit":3}`,
	`{"id":"a\uD800","scale":1000,"limit":3}`,
	`{"id":"\ud800\u0041","scale":1000,"limit":3}`,
	`{"id":"\ud800\ud800\udc00","scale":1000,"limit":3}`,
	`{"id":"\ud83d\ude00\\udc00","scale":1000,"limit":3}`,
	`{"id":"\ufffd","scale":1000,"limit":3}`,
	"{\"id\":\"\\n\xfe\",\"scale\":1000,\"limit\":3}",
	"{\"id\":\"\xed\xa0\x80\",\"scale\":1000,\"limit\":3}",
	"{\"id\":\"\xff\",\"rule\":\"x\",\"hits\":-1}",
	`[{"id":"a","scale":1000,"limit":3},{"id":"\udfff","scale":1000,"limit":3}]`,
	"{\"id\":\"" + strings.Repeat("\xff", 400) + "\",\"scale\":1000,\"limit\":3}",
	`{"id":"` + strings.Repeat(`\ud800`, 200) + `","scale":1000,"limit":3}`,
}

// fuzzSeeds returns the bodies FuzzParseBody starts from: those of the
// other tests and bodySeeds.
func fuzzSeeds() []string {
	seeds := append([]string(nil), jsonSeeds...)
	seeds = append(seeds, bodySeeds...)
	for _, tt := range parseBodyErrorTests {
		seeds = append(seeds, tt.body)
	}
	elem := `{"id":"a","scale":1000,"limit":3}`
	seeds = append(seeds, "["+strings.Repeat(elem+",", table.MaxBatch)+elem+"]")
	seeds = append(seeds, "["+strings.Repeat(elem+",", table.MaxBatch-1)+elem+",]")
	refill := `{"id":"r","scale":"8784h","limit":1,"algorithm":"token_bucket","burst":2}`
	seeds = append(seeds, refill, refill+" x", "["+elem+","+refill+"]", "["+refill+`,{"id":"b",]`, "["+refill+"]{}")
	return seeds
}

// FuzzParseBody holds parseBody to the reference parser, answers and
// error messages alike, for bodies read to their end and bodies cut short
// by MaxBodyBytes (cut), and checks what it accepts against encoding/json.
func FuzzParseBody(f *testing.F) {
	for _, s := range fuzzSeeds() {
		for m := ModeCheck; m <= ModeBuckets; m++ {
			f.Add([]byte(s), uint8(m), false)
			f.Add([]byte(s), uint8(m), true)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, m uint8, cut bool) {
		md := Mode(m) % (ModeBuckets + 1)
		got, err := parseJSON(cutReader(body, cut), md)
		if err == nil {
			// What parseBody leaves to the Checker, the Checker finds.
			if got.Batch != nil {
				err = FirstFault(got.Batch, true, nil)
			} else {
				err = FirstFault([]Params{got.One}, false, nil)
			}
		}
		want, wantErr := refParseJSON(cutReader(body, cut), md)
		if d := sameParse(got, err, want, wantErr); d != "" {
			t.Fatalf("%q (mode %d, cut %v): %s", body, md, cut, d)
		}
		if err != nil {
			return
		}
		// Agree with encoding/json on every value taken.
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%q: accepted, but encoding/json fails: %v", body, err)
		}
		if got.Batch == nil {
			sameMembers(t, body, md, got.One, v)
			return
		}
		elems, ok := v.([]any)
		if !ok || len(elems) != len(got.Batch) {
			t.Fatalf("%q: got a batch of %d, encoding/json has %#v", body, len(got.Batch), v)
		}
		for i, e := range elems {
			sameMembers(t, body, md, got.Batch[i], e)
		}
	})
}

// sameMembers checks p against v, the value encoding/json (with UseNumber)
// decodes its JSON object to: the same members, the same values.
func sameMembers(t *testing.T, body []byte, md Mode, p Params, v any) {
	t.Helper()
	obj, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%q: got %+v, encoding/json has %#v", body, p, v)
	}
	var seen uint
	for k := range obj {
		bit := fieldBit(k)
		if bit == 0 {
			t.Fatalf("%q: accepted member %q", body, k)
		}
		seen |= bit
	}
	if seen != p.seen {
		t.Fatalf("%q: got members %b, encoding/json has %v", body, p.seen, obj)
	}
	str := func(k string) string {
		s, ok := obj[k].(string)
		if !ok {
			t.Fatalf("%q: accepted %s %#v, want a string", body, k, obj[k])
		}
		return s
	}
	num := func(k string) int64 {
		n, ok := obj[k].(json.Number)
		if !ok {
			t.Fatalf("%q: accepted %s %#v, want a number", body, k, obj[k])
		}
		i, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			t.Fatalf("%q: accepted %s %s: %v", body, k, n, err)
		}
		return i
	}
	want := table.Request{ID: str("id")}
	var wantRule string
	if _, ok := obj["rule"]; ok {
		wantRule = str("rule")
	}
	if _, ok := obj["scale"]; ok {
		if s, isStr := obj["scale"].(string); isStr {
			d, err := time.ParseDuration(s)
			if err != nil {
				ms, perr := strconv.ParseInt(s, 10, 64)
				if perr != nil {
					t.Fatalf("%q: accepted scale %q: %v", body, s, err)
				}
				d = time.Duration(ms) * time.Millisecond
			}
			want.Scale = d
		} else {
			want.Scale = time.Duration(num("scale")) * time.Millisecond
		}
	}
	if _, ok := obj["limit"]; ok {
		want.Limit = num("limit")
	}
	if _, ok := obj["burst"]; ok {
		want.Burst = num("burst")
	}
	if _, ok := obj["algorithm"]; ok {
		a, err := table.ParseAlgorithm(str("algorithm"))
		if err != nil {
			t.Fatalf("%q: accepted algorithm %q: %v", body, obj["algorithm"], err)
		}
		want.Algorithm = a
	}
	switch _, ok := obj["hits"]; {
	case ok && md == ModeRefund:
		want.Hits = -num("hits")
	case ok:
		want.Hits = num("hits")
	case md == ModeCheck:
		want.Hits = 1
	}
	if p.Req != want || p.Rule != wantRule {
		t.Fatalf("%q: got %+v rule %q, encoding/json has %+v rule %q", body, p.Req, p.Rule, want, wantRule)
	}
}

// parseBodyErrorTests are bodies parseBody refuses, with the exact error:
// the syntax errors that encoding/json's Decoder gave where the reference
// parser found them, and the errors of a body cut short by MaxBodyBytes
// (cut). The offset of an unexpected token is its place in the body; that
// of an error within a key or value counts the bytes of the keys and
// values before it (white space after colons included), as the Decoder
// counted.
var parseBodyErrorTests = []struct {
	name string
	body string
	cut  bool // the body goes on past MaxBodyBytes
	want string
}{
	{"top close bracket", `]`, false, "body: is malformed JSON at byte 0: invalid character ']' looking for beginning of value"},
	{"top comma", ` ,`, false, "body: is malformed JSON at byte 1: invalid character ',' looking for beginning of value"},
	{"top word", `x`, false, "body: is malformed JSON at byte 1: invalid character 'x' looking for beginning of value"},
	{"top string", `"x"`, false, "body: " + msgBody},
	{"top open string", `"x`, false, "body: " + MsgTruncated},
	{"top huge number", `1e400`, false, "body: could not be read: json: cannot unmarshal number 1e400 into Go value of type float64"},
	{"first key not a string", `{5:1}`, false, "body: is malformed JSON at byte 1: invalid character '5'"},
	{"first key bracket", `{]`, false, "body: is malformed JSON at byte 1: invalid character ']'"},
	{"missing comma", `{"id":"a" "scale":1}`, false, "body: is malformed JSON at byte 10: invalid character '\"' after object key:value pair"},
	{"key not a string", `{"id":"a",5:1}`, false, "body: is malformed JSON at byte 10: invalid character '5' looking for beginning of object key string"},
	{"trailing comma", `{"id":"a",}`, false, "body: is malformed JSON at byte 10: invalid character '}' looking for beginning of object key string"},
	{"object closed by bracket", `{"id":"a"]`, false, "body: is malformed JSON at byte 9: invalid character ']' after object key:value pair"},
	{"missing colon", `{"id" "a"}`, false, "body: is malformed JSON at byte 6: expected colon after object key"},
	{"key control character", "{\"i\x01\":1}", false, "body: is malformed JSON at byte 3: invalid character '\\x01' in string literal"},
	{"key not UTF-8", "{\"\xff\":1}", false, "\ufffd: " + msgUnknown},
	{"escaped key", `{"\u0069d":""}`, false, "id: " + table.MsgRequired},
	{"value bad escape", `{"id":"\x"}`, false, "body: is malformed JSON at byte 7: invalid character 'x' in string escape code"},
	{"value bad literal", `{"id":nul}`, false, "body: is malformed JSON at byte 8: invalid character '}' in literal null (expecting 'l')"},
	{"value bad number", `{"limit":1.}`, false, "body: is malformed JSON at byte 10: invalid character '}' after decimal point in numeric literal"},
	{"value nested", `{"scale":[[1],{"a":true}],"id":"a"}`, false, "scale: " + msgScale},
	{"value nested malformed", `{"scale":[[1],{"a" true}]}`, false, "body: is malformed JSON at byte 18: invalid character 't' after object key"},
	{"value too deep", `{"scale":` + strings.Repeat("[", 10001) + `}`, false, "body: is malformed JSON at byte 10008: invalid character '[' exceeded max depth"},
	{"value as deep as allowed", `{"limit":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, false, "limit: " + msgLimit},
	{"element comma", `[,]`, false, "body: is malformed JSON at byte 1: invalid character ',' looking for beginning of value"},
	{"element close brace", `[}`, false, "body: is malformed JSON at byte 1: invalid character '}' looking for beginning of value"},
	{"element after comma", `[{"id":"a","scale":1,"limit":1},]`, false, "body: is malformed JSON at byte 32: invalid character ']' looking for beginning of value"},
	{"element missing comma", `[{"id":"a","scale":1,"limit":1} {}]`, false, "body: is malformed JSON at byte 32: invalid character '{' after array element"},
	{"array closed by brace", `[{"id":"a","scale":1,"limit":1}}`, false, "body: is malformed JSON at byte 31: invalid character '}' after array element"},
	{"element string", `[{"id":"a","scale":1,"limit":1},"x"]`, false, "checks[1]: " + MsgObject},
	{"element huge number", `[1e400]`, false, "body: could not be read: json: cannot unmarshal number 1e400 into Go value of type float64"},
	{"trailing brace", `{"id":"a","scale":1,"limit":1}}`, false, "body: is malformed JSON at byte 30: invalid character '}' looking for beginning of value"},
	{"trailing word", `{"id":"a","scale":1,"limit":1} x`, false, "body: is malformed JSON at byte 24: invalid character 'x' looking for beginning of value"},
	{"trailing number", `{"id":"a","scale":1,"limit":1} 5`, false, "body: " + MsgTrailing},
	{"trailing open string", `{"id":"a","scale":1,"limit":1} "x`, false, "body: " + MsgTruncated},
	{"cut empty", ``, true, "body: " + msgBodyLarge},
	{"cut whitespace", `  `, true, "body: " + msgBodyLarge},
	{"cut after object", `{"id":"a","scale":1,"limit":1} `, true, "body: " + msgBodyLarge},
	{"cut after number", `{"id":"a","scale":1,"limit":1`, true, "body: " + msgBodyLarge},
	{"cut after key", `{"id"`, true, "body: " + msgBodyLarge},
	{"cut after unknown key", `{"x"`, true, "body: " + msgBodyLarge},
	{"cut after unknown key and space", `{"x" `, true, "x: " + msgUnknown},
	{"cut after comma", `[{"id":"a","scale":1,"limit":1},`, true, "body: " + msgBodyLarge},
	{"cut after error", `{"id":"","scale":1`, true, "id: " + table.MsgRequired},
}

func TestParseBodyErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range parseBodyErrorTests {
		_, err := parseJSON(cutReader([]byte(tt.body), tt.cut), ModeCheck)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: parseJSON(%.80q, cut %v): got error %v, want %q", tt.name, tt.body, tt.cut, err, tt.want)
		}
		var fe *table.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: got error %T, want a *table.FieldError", tt.name, err)
		}
	}
}

// TestReadBody reads bodies of known and unknown length, within and past
// MaxBodyBytes.
func TestReadBody(t *testing.T) {
	t.Parallel()
	full := strings.Repeat("x", MaxBodyBytes)
	tests := []struct {
		name    string
		body    string
		size    int64
		prefix  []byte
		wantLen int
		wantErr bool
	}{
		{"empty", "", 0, nil, 0, false},
		{"known size", "abc", 3, nil, 3, false},
		{"unknown size", "abc", -1, nil, 3, false},
		{"size too small", "abcdef", 2, nil, 6, false},
		{"after a prefix", "abc", 3, []byte("zz"), 5, false},
		{"full", full, MaxBodyBytes, nil, MaxBodyBytes, false},
		{"too large", full + "y", MaxBodyBytes + 1, nil, MaxBodyBytes, true},
		{"too large, unknown size", full + "yy", -1, nil, MaxBodyBytes, true},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		r := http.MaxBytesReader(rec, io.NopCloser(strings.NewReader(tt.body)), MaxBodyBytes)
		b, err := readBody(r, tt.prefix, tt.size)
		if len(b) != tt.wantLen || (err != nil) != tt.wantErr {
			t.Errorf("%s: got %d bytes, error %v, want %d bytes, error %v", tt.name, len(b), err, tt.wantLen, tt.wantErr)
		}
		if tt.wantErr && !errors.As(err, new(*http.MaxBytesError)) {
			t.Errorf("%s: got error %v, want a *http.MaxBytesError", tt.name, err)
		}
		if string(b) != string(tt.prefix)+tt.body[:tt.wantLen-len(tt.prefix)] {
			t.Errorf("%s: got %.20q…, want the prefix and the body", tt.name, b)
		}
	}
}

// BenchmarkParseBody parses a batch of 100 checks. ns/check is ns/op per
// check.
func BenchmarkParseBody(b *testing.B) {
	var sb strings.Builder
	sb.WriteByte('[')
	for i := range 100 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":"user-%d","scale":3600000,"limit":1000000000000}`, i)
	}
	sb.WriteByte(']')
	body := sb.String()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseBody(body, nil, ModeCheck, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/check")
}

// TestParseDigits covers both ways parseDigits goes: numbers too short to
// overflow, and longer ones, checked digit by digit.
func TestParseDigits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s      string
		want   int64
		wantOK bool
	}{
		{"0", 0, true},
		{"007", 7, true},
		{"999999999999999999", 999999999999999999, true}, // 18 digits: the short way
		{"9223372036854775807", 9223372036854775807, true},
		{"0000000000000000000000042", 42, true},
		{"9223372036854775808", 0, false},
		{"10000000000000000000", 0, false},
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.0", 0, false},
		{"12345678901234567x", 0, false},
		{"1234567890123456789x", 0, false},
		{"1/", 0, false},
		{"1:", 0, false},
	}
	for _, tt := range tests {
		if got, ok := parseDigits(tt.s); got != tt.want || ok != tt.wantOK {
			t.Errorf("parseDigits(%q): got %d, %v, want %d, %v", tt.s, got, ok, tt.want, tt.wantOK)
		}
	}
}
