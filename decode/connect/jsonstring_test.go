package connect

import "testing"

// The expected literals are Jackson's (Kafka's JsonConverter) as `make
// compat` saw them: '"' and '\' escaped, control characters short or
// \u00XX in upper-case hex, a code point above U+FFFF as its surrogate
// pair, '/' and other UTF-8 kept.
func TestAppendJSONString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", `"plain"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"\b\t\n\f\r", `"\b\t\n\f\r"`},
		{"\x01\x1f", `"\u0001\u001F"`},
		{"a/b é \u2028", "\"a/b é \u2028\""},
		{"🎉", `"\uD83C\uDF89"`},
		{"", `""`},
	} {
		if got := string(AppendJSONString(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("AppendJSONString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestJavaBlank(t *testing.T) {
	for in, want := range map[string]bool{"": true, " \t\r\n\x00": true, " x ": false, "\u00a0": false} {
		if got := JavaBlank([]byte(in)); got != want {
			t.Errorf("JavaBlank(%q) = %v, want %v", in, got, want)
		}
	}
}
