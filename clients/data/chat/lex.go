package chat

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The lexer follows jinja2's as transformers configures it: trim_blocks and
// lstrip_blocks on, keep_trailing_newline off, and the default delimiters.

type tokKind int

const (
	tokText       tokKind = iota
	tokVarBegin           // {{
	tokVarEnd             // }}
	tokBlockBegin         // {%
	tokBlockEnd           // %}
	tokName
	tokString
	tokInt
	tokOp
	tokEOF
)

type token struct {
	kind tokKind
	val  string // text, name, unescaped string, digits or operator
	pos  int    // byte offset in the normalized source
}

// normalizeSource does what jinja2 does before lexing: "\r\n" and "\r"
// become "\n", and one trailing newline is dropped (keep_trailing_newline
// is off).
func normalizeSource(src string) string {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	return strings.TrimSuffix(src, "\n")
}

// isPySpace reports whether Python's str.isspace (and so re's \s and
// str.strip) counts r as whitespace.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

func skipPySpace(s string, i int) int {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !isPySpace(r) {
			break
		}
		i += size
	}
	return i
}

// lexer turns normalized template source into tokens.
type lexer struct {
	src  string
	pos  int
	toks []token
}

func lex(src string) ([]token, error) {
	l := &lexer{src: src}
	if err := l.run(); err != nil {
		return nil, err
	}
	l.toks = append(l.toks, token{kind: tokEOF, pos: len(src)})
	return l.toks, nil
}

// nextTag finds the next "{{", "{%" or "{#" at or after from.
func nextTag(s string, from int) int {
	for i := from; i+1 < len(s); i++ {
		if s[i] == '{' && (s[i+1] == '{' || s[i+1] == '%' || s[i+1] == '#') {
			return i
		}
	}
	return -1
}

func (l *lexer) run() error {
	lineStarting := true
	for l.pos < len(l.src) {
		at := nextTag(l.src, l.pos)
		if at < 0 {
			l.emit(tokText, l.src[l.pos:], l.pos)
			return nil
		}
		text, kind := l.src[l.pos:at], l.src[at+1]
		var sign byte
		if at+2 < len(l.src) && (l.src[at+2] == '-' || l.src[at+2] == '+') {
			sign = l.src[at+2]
		}
		switch {
		case sign == '-':
			text = strings.TrimRightFunc(text, isPySpace)
		case sign != '+' && kind != '{':
			// lstrip_blocks: a block or comment tag alone on its line so far
			// takes the spaces and tabs before it.
			lpos := strings.LastIndexByte(text, '\n') + 1
			if (lpos > 0 || lineStarting) && strings.Trim(text[lpos:], " \t") == "" {
				text = text[:lpos]
			}
		}
		l.emit(tokText, text, l.pos)
		l.pos = at + 2
		if sign != 0 {
			l.pos++
		}
		var err error
		switch kind {
		case '#':
			err = l.comment(at)
		case '{':
			l.emit(tokVarBegin, "", at)
			err = l.inside(at, tokVarEnd, '}')
		default:
			l.emit(tokBlockBegin, "", at)
			err = l.inside(at, tokBlockEnd, '%')
		}
		if err != nil {
			return err
		}
		lineStarting = l.pos > 0 && l.src[l.pos-1] == '\n'
	}
	return nil
}

func (l *lexer) emit(kind tokKind, val string, pos int) {
	if kind == tokText && val == "" {
		return
	}
	l.toks = append(l.toks, token{kind, val, pos})
}

// afterEnd moves past an end delimiter whose first byte is at end, taking
// the whitespace that "-" and trim_blocks remove after it. trimNewline is
// trim_blocks, which applies to blocks and comments but not to variables.
func (l *lexer) afterEnd(end int, sign byte, trimNewline bool) {
	l.pos = end + 2
	switch {
	case sign == '-':
		l.pos = skipPySpace(l.src, l.pos)
	case sign == 0 && trimNewline && l.pos < len(l.src) && l.src[l.pos] == '\n':
		l.pos++
	}
}

// endDelimiter reports whether s starts with the end delimiter closer+"}",
// possibly signed ("+" only for blocks, as in jinja2), and where it starts.
func endDelimiter(s string, closer byte) (end int, sign byte, ok bool) {
	tail := string(closer) + "}"
	switch {
	case strings.HasPrefix(s, tail):
		return 0, 0, true
	case strings.HasPrefix(s, "-"+tail):
		return 1, '-', true
	case closer == '%' && strings.HasPrefix(s, "+"+tail):
		return 1, '+', true
	}
	return 0, 0, false
}

// endSign returns the "-" or "+" just before an end delimiter at i, if it
// lies after from.
func endSign(s string, i, from int) byte {
	if i > from && (s[i-1] == '-' || s[i-1] == '+') {
		return s[i-1]
	}
	return 0
}

func (l *lexer) comment(begin int) error {
	i := strings.Index(l.src[l.pos:], "#}")
	if i < 0 {
		return errAt(l.src, begin, "missing end of comment tag")
	}
	end := l.pos + i
	l.afterEnd(end, endSign(l.src, end, l.pos-1), true)
	return nil
}

// operators, longest first so that "//" wins over "/".
var operators = []string{"**", "//", "==", "!=", ">=", "<=", "+", "-", "*", "/", "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"}

// inside lexes the expression tokens of a {{ }} or {% %} tag up to its end
// delimiter (closer followed by "}"). As in jinja2, the end delimiter is
// only recognized while brackets are balanced.
func (l *lexer) inside(begin int, endKind tokKind, closer byte) error {
	depth := 0
	for {
		if l.pos >= len(l.src) {
			return errAt(l.src, begin, "the tag opened here is never closed")
		}
		s := l.src[l.pos:]
		if depth == 0 {
			if end, sign, ok := endDelimiter(s, closer); ok {
				l.emit(endKind, "", l.pos+end)
				l.afterEnd(l.pos+end, sign, closer == '%')
				return nil
			}
		}
		c := s[0]
		switch {
		case isPySpace(firstRune(s)):
			l.pos = skipPySpace(l.src, l.pos)
		case isNameByte(c, false):
			n := 1
			for n < len(s) && isNameByte(s[n], true) {
				n++
			}
			l.emit(tokName, s[:n], l.pos)
			l.pos += n
		case c >= '0' && c <= '9':
			n := 1
			for n < len(s) && (s[n] >= '0' && s[n] <= '9' || s[n] == '_') {
				n++
			}
			if n < len(s) && (s[n] == '.' && n+1 < len(s) && s[n+1] >= '0' && s[n+1] <= '9' || s[n] == 'e' || s[n] == 'E') {
				return errAt(l.src, l.pos, "floating-point numbers are not supported")
			}
			l.emit(tokInt, strings.ReplaceAll(s[:n], "_", ""), l.pos)
			l.pos += n
		case c == '\'' || c == '"':
			n, val, err := lexString(s)
			if err != nil {
				return errAt(l.src, l.pos, "%v", err)
			}
			l.emit(tokString, val, l.pos)
			l.pos += n
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(s, o) {
					op = o
					break
				}
			}
			if op == "" {
				return errAt(l.src, l.pos, "unexpected character %q", firstRune(s))
			}
			switch op {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				depth--
				if depth < 0 {
					return errAt(l.src, l.pos, "unexpected %q", op)
				}
			}
			l.emit(tokOp, op, l.pos)
			l.pos += len(op)
		}
	}
}

func isNameByte(c byte, digitOK bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || digitOK && c >= '0' && c <= '9'
}

func firstRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

// lexString reads a quoted string literal at the start of s and unescapes
// it as jinja2 does, with Python's unicode-escape rules.
func lexString(s string) (n int, val string, err error) {
	quote := s[0]
	var b strings.Builder
	for i := 1; i < len(s); {
		c := s[i]
		switch {
		case c == quote:
			return i + 1, b.String(), nil
		case c != '\\':
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			break
		}
		e := s[i+1]
		i += 2
		switch e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+width > len(s) {
				return 0, "", fmt.Errorf("truncated \\%c escape in a string", e)
			}
			v, perr := strconv.ParseUint(s[i:i+width], 16, 32)
			if perr != nil || v > unicode.MaxRune || v >= 0xd800 && v < 0xe000 {
				return 0, "", fmt.Errorf("bad \\%c escape %q in a string", e, s[i:i+width])
			}
			b.WriteRune(rune(v))
			i += width
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(e - '0')
			for k := 0; k < 2 && i < len(s) && s[i] >= '0' && s[i] <= '7'; k++ {
				v = v*8 + int(s[i]-'0')
				i++
			}
			b.WriteRune(rune(v))
		case 'N':
			return 0, "", fmt.Errorf("\\N{...} escapes are not supported")
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return 0, "", fmt.Errorf("unterminated string")
}

// lineCol turns a byte offset into a 1-based line and column (in characters).
func lineCol(src string, pos int) (int, int) {
	if pos > len(src) {
		pos = len(src)
	}
	before := src[:pos]
	line := strings.Count(before, "\n") + 1
	col := utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
	return line, col
}

// Error is a template that cannot be parsed or rendered, at a position of
// its (newline-normalized) source.
type Error struct {
	Line, Col int
	Msg       string
}

func (e *Error) Error() string {
	return fmt.Sprintf("chat template line %d:%d: %s", e.Line, e.Col, e.Msg)
}

func errAt(src string, pos int, format string, args ...any) error {
	line, col := lineCol(src, pos)
	return &Error{line, col, fmt.Sprintf(format, args...)}
}
