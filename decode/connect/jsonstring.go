package connect

import (
	"unicode/utf16"
	"unicode/utf8"
)

const hexDigits = "0123456789ABCDEF"

// AppendJSONString appends s as a JSON string literal the way Jackson (the
// JSON library of Kafka's JsonConverter) writes one: '"' and '\' escaped,
// the control characters below 0x20 as \b \t \n \f \r or \u00XX
// (upper-case hex), a code point above U+FFFF as its surrogate pair
// \uXXXX\uXXXX, everything else as it is (UTF-8 kept, '/' and U+2028 not
// escaped).
func AppendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0xF0 {
			continue
		}
		dst = append(dst, s[start:i]...)
		if c >= 0xF0 {
			// N.B. a code point above U+FFFF (a 4-byte UTF-8 sequence):
			// Jackson writes its UTF-16 surrogate pair as two \uXXXX
			// escapes, seen in `make compat` (🎉 is \uD83C\uDF89).
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size <= 1 {
				dst = append(dst, c) // not UTF-8: a UTF-8 source never sends it
				start = i + 1
				continue
			}
			r1, r2 := utf16.EncodeRune(r)
			dst = appendU(appendU(dst, r1), r2)
			i += size - 1
			start = i + 1
			continue
		}
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendU appends the escape \uXXXX of UTF-16 unit r, upper-case hex.
func appendU(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// JavaBlank reports whether Java's String.trim() of s is empty: every
// byte is at most U+0020 (the router's route.tombstone.on.empty.payload
// test, payload.toString().trim().isEmpty()).
func JavaBlank(s []byte) bool {
	for _, c := range s {
		if c > ' ' {
			return false
		}
	}
	return true
}
