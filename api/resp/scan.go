package resp

// scanner follows the RESP frames of a connection's byte stream, as redcon
// will parse them, without holding them: it finds where each frame ends
// and enforces the argument count, bulk size and inline length limits as
// the bytes arrive, before the connection reads more. It accepts a subset
// of what redcon accepts (lengths are plain digits, an array has at least
// one element), so that every frame it passes is one redcon parses the
// same way, whole, and a connection never buffers more than a bounded
// frame.
type scanner struct {
	maxArgs, maxBulk, maxInline int64

	state uint8
	n     int64 // the number being read, the bulk bytes left, or the inline line's length
	args  int64 // the bulk strings still to come in the current array
	digit bool  // a digit of the number being read has been seen
	cr    bool  // the inline line read so far ends with '\r'
}

// Scanner states.
const (
	stStart     uint8 = iota // at a frame boundary
	stInline                 // in an inline command, until '\n'
	stCount                  // in the digits of "*N"
	stCountLF                // after "*N\r"
	stDollar                 // expecting '$'
	stBulkLen                // in the digits of "$N"
	stBulkLenLF              // after "$N\r"
	stBulkData               // in a bulk string's bytes
	stBulkCR                 // expecting the '\r' after a bulk string
	stBulkLF                 // expecting the '\n' after a bulk string
)

// protoError is a violation of the protocol or of a limit. Its text is
// Redis's wording of the same fault, after "ERR ".
type protoError struct{ msg string }

func (e *protoError) Error() string { return "Protocol error: " + e.msg }

var (
	errMultibulkLen = &protoError{"invalid multibulk length"}
	errBulkLen      = &protoError{"invalid bulk length"}
	errInlineLen    = &protoError{"too big inline request"}
)

// mid reports whether the scanner is inside a frame.
func (s *scanner) mid() bool { return s.state != stStart }

// scan advances over b, the next bytes of the stream. It returns the
// offset in b just past the last frame that ends in b, or -1 if none does,
// and the first violation found, if any; bytes after a violation are not
// looked at, and the scanner must not be used again.
func (s *scanner) scan(b []byte) (end int, err error) {
	end = -1
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch s.state {
		case stStart:
			if c == '*' {
				s.state, s.n, s.digit = stCount, 0, false
				continue
			}
			s.state, s.n, s.cr = stInline, 0, false
			fallthrough
		case stInline:
			// Skip to the end of the line at once.
			j := i
			for j < len(b) && b[j] != '\n' {
				j++
			}
			if j > i {
				s.n += int64(j - i)
				s.cr = b[j-1] == '\r'
			}
			// The line's length, its line break not counted.
			line := s.n
			if s.cr {
				line--
			}
			if line > s.maxInline {
				return end, errInlineLen
			}
			i = j
			if j < len(b) {
				s.state, s.cr = stStart, false
				end = i + 1
			}
		case stCount:
			switch {
			case '0' <= c && c <= '9':
				s.n = s.n*10 + int64(c-'0')
				s.digit = true
				if s.n > s.maxArgs {
					return end, errMultibulkLen
				}
			case c == '\r' && s.digit && s.n > 0:
				s.state = stCountLF
			default:
				return end, errMultibulkLen
			}
		case stCountLF:
			if c != '\n' {
				return end, errMultibulkLen
			}
			s.state, s.args = stDollar, s.n
		case stDollar:
			if c != '$' {
				return end, &protoError{"expected '$', got '" + string(c) + "'"}
			}
			s.state, s.n, s.digit = stBulkLen, 0, false
		case stBulkLen:
			switch {
			case '0' <= c && c <= '9':
				s.n = s.n*10 + int64(c-'0')
				s.digit = true
				if s.n > s.maxBulk {
					return end, errBulkLen
				}
			case c == '\r' && s.digit:
				s.state = stBulkLenLF
			default:
				return end, errBulkLen
			}
		case stBulkLenLF:
			if c != '\n' {
				return end, errBulkLen
			}
			s.state = stBulkData
			if s.n == 0 {
				s.state = stBulkCR
			}
		case stBulkData:
			skip := min(s.n, int64(len(b)-i))
			s.n -= skip
			i += int(skip) - 1
			if s.n == 0 {
				s.state = stBulkCR
			}
		case stBulkCR:
			if c != '\r' {
				return end, errBulkLen
			}
			s.state = stBulkLF
		case stBulkLF:
			if c != '\n' {
				return end, errBulkLen
			}
			s.args--
			s.state = stDollar
			if s.args == 0 {
				s.state = stStart
				end = i + 1
			}
		}
	}
	return end, nil
}
