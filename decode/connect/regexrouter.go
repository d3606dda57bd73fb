package connect

import (
	"fmt"
	"regexp"
	"strings"
)

// RegexRouter is Kafka Connect's RegexRouter as the router configures it
// (route.topic.regex, route.topic.replacement): when the regular
// expression matches the whole routing value, the topic is the
// replacement with its group references filled in; otherwise the topic is
// the routing value itself.
type RegexRouter struct {
	re    *regexp.Regexp
	parts []replPart
}

// replPart is a literal or a group reference of a replacement.
type replPart struct {
	lit   string
	group int // >= 0: a group reference
}

// CompileRegexRouter compiles a Java regular expression (Go's RE2 syntax
// takes the common ones; look-arounds and back references are refused)
// and a Java replacement string: $n and ${name} refer to groups, \x is a
// literal x.
func CompileRegexRouter(expr, repl string) (*RegexRouter, error) {
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, fmt.Errorf("topic regex %q: %w (walrelay takes the regular expressions Go's regexp package does: no look-arounds or back references)", expr, err)
	}
	t := &RegexRouter{re: re}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, replPart{lit: lit.String(), group: -1})
			lit.Reset()
		}
	}
	groups := re.NumSubexp()
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		switch {
		case c == '\\':
			i++
			if i >= len(repl) {
				return nil, fmt.Errorf("topic replacement %q: character to be escaped is missing", repl)
			}
			lit.WriteByte(repl[i])
		case c != '$':
			lit.WriteByte(c)
		case i+1 < len(repl) && repl[i+1] == '{':
			end := strings.IndexByte(repl[i+2:], '}')
			if end < 0 {
				return nil, fmt.Errorf("topic replacement %q: named group is missing its '}'", repl)
			}
			name := repl[i+2 : i+2+end]
			g := re.SubexpIndex(name)
			if g < 0 {
				return nil, fmt.Errorf("topic replacement %q: no group named %q in topic regex %q", repl, name, expr)
			}
			flush()
			t.parts = append(t.parts, replPart{group: g})
			i += 2 + end
		case i+1 < len(repl) && repl[i+1] >= '0' && repl[i+1] <= '9':
			// N.B. Java's rule: the first digit is the group; more digits
			// are taken while the number stays a group of the pattern.
			i++
			g := int(repl[i] - '0')
			if g > groups {
				return nil, fmt.Errorf("topic replacement %q: no group %d in topic regex %q", repl, g, expr)
			}
			for i+1 < len(repl) && repl[i+1] >= '0' && repl[i+1] <= '9' {
				n := g*10 + int(repl[i+1]-'0')
				if n > groups {
					break
				}
				g = n
				i++
			}
			flush()
			t.parts = append(t.parts, replPart{group: g})
		default:
			return nil, fmt.Errorf("topic replacement %q: illegal group reference at offset %d (write \\$ for a literal $)", repl, i)
		}
	}
	flush()
	return t, nil
}

// AppendTopic appends the topic for routing value v. It allocates (the
// regexp's match indexes); the decoder caches each value's topic.
func (t *RegexRouter) AppendTopic(dst, v []byte) []byte {
	m := t.re.FindSubmatchIndex(v)
	if m == nil {
		return append(dst, v...)
	}
	for _, p := range t.parts {
		if p.group < 0 {
			dst = append(dst, p.lit...)
			continue
		}
		if s, e := m[2*p.group], m[2*p.group+1]; s >= 0 {
			dst = append(dst, v[s:e]...)
		}
	}
	return dst
}
