package connect

import "testing"

// RegexRouter as Kafka Connect's: the whole value must match, $n and
// ${name} are groups, \x a literal x; no match leaves the value.
func TestRegexRouter(t *testing.T) {
	for _, tc := range []struct{ expr, repl, value, want string }{
		{`(.*)\.(.*)`, `$2-$1`, "a.b", "b-a"},
		{`(?P<agg>[a-z]+)`, `outbox.${agg}`, "orders", "outbox.orders"},
		{`(a)`, `x\$1`, "a", "x$1"},
		{`(a)`, `$1`, "ab", "ab"},
		{`(a)`, `$12`, "a", "a2"},
	} {
		r, err := CompileRegexRouter(tc.expr, tc.repl)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.expr, tc.repl, err)
		}
		if got := string(r.AppendTopic(nil, []byte(tc.value))); got != tc.want {
			t.Errorf("%s -> %s of %q = %q, want %q", tc.expr, tc.repl, tc.value, got, tc.want)
		}
	}
	for _, tc := range []struct{ expr, repl string }{
		{`(?=a)`, `x`}, {`(a)`, `$2`}, {`(a)`, `${nope}`}, {`(a)`, `x\`}, {`(a)`, `$x`},
	} {
		if _, err := CompileRegexRouter(tc.expr, tc.repl); err == nil {
			t.Errorf("%s -> %s accepted", tc.expr, tc.repl)
		}
	}
}
