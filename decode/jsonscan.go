package decode

import (
	"unicode/utf16"
	"unicode/utf8"
)

// A scanner of the message source's content (message.go): the members of a
// JSON object that json.Valid accepted, without decoding them, and a JSON
// string's body unescaped into a reused buffer.

// jsonField is one member of a JSON object: its key as written (quotes and
// escapes included) and its value's JSON text.
type jsonField struct{ key, val []byte }

// objectFields appends the members of the JSON object b, which is valid
// JSON, to out; ok is false when b is not an object.
func objectFields(b []byte, out []jsonField) ([]jsonField, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return out, false
	}
	i = skipSpace(b, i+1)
	if b[i] == '}' {
		return out, true
	}
	for {
		ks := i
		i = skipString(b, i)
		key := b[ks:i]
		i = skipSpace(b, i)
		i = skipSpace(b, i+1) // ':'
		vs := i
		i = skipValue(b, i)
		out = append(out, jsonField{key: key, val: b[vs:i]})
		i = skipSpace(b, i)
		if b[i] == '}' {
			return out, true
		}
		i = skipSpace(b, i+1) // ','
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index after the value that starts at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// appendUnescaped appends the JSON string body s (valid, without its
// quotes) unescaped to b.
func appendUnescaped(b, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b = append(b, c)
			continue
		}
		i++
		switch s[i] {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(s[i+1 : i+5])
			i += 4
			if utf16.IsSurrogate(r) && i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if r2 := utf16.DecodeRune(r, hex4(s[i+3:i+7])); r2 != utf8.RuneError {
					r = r2
					i += 6
				}
			}
			b = utf8.AppendRune(b, r)
		default: // '"', '\\', '/'
			b = append(b, s[i])
		}
	}
	return b
}

func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}
