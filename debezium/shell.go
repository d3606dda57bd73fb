package debezium

import "strings"

// ShellQuote quotes s for a POSIX shell when it holds more than
// [A-Za-z0-9._/:@%+=,-].
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._/:@%+=,-", c) >= 0) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
