package javaprops

import "testing"

// TestUnescape: what java.util.Properties.load makes of each escape.
func TestUnescape(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		err      bool
	}{
		{`plain`, "plain", false},
		{`a\tb\nc\rd\fe`, "a\tb\nc\rd\fe", false},
		{`\u00e9t\u00E9`, "été", false},
		{`key\=with\:separators\ and\\slash`, `key=with:separators and\slash`, false},
		{`trailing\`, `trailing\`, false},
		{`bad\u12`, "", true},
		{`bad\uzzzz`, "", true},
	} {
		got, err := Unescape(tt.in)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("Unescape(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}
