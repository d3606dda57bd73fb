package decode

import (
	"fmt"
	"strings"
)

// Template is a topic template: literal text with ${column} references, as
// in "outbox.event.${aggregatetype}".
type Template struct {
	src   string
	parts []templatePart
}

type templatePart struct {
	lit    string
	column string // non-empty: a column reference
}

// ParseTemplate parses s. A literal "$" is written "$$".
func ParseTemplate(s string) (Template, error) {
	t := Template{src: s}
	var lit strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' {
			lit.WriteByte(c)
			continue
		}
		if i+1 < len(s) && s[i+1] == '$' {
			lit.WriteByte('$')
			i++
			continue
		}
		if i+1 >= len(s) || s[i+1] != '{' {
			return Template{}, fmt.Errorf("topic template %q: '$' at offset %d must start ${column} (write $$ for a literal $)", s, i)
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return Template{}, fmt.Errorf("topic template %q: unclosed ${ at offset %d", s, i)
		}
		name := s[i+2 : i+2+end]
		if name == "" {
			return Template{}, fmt.Errorf("topic template %q: empty ${} at offset %d", s, i)
		}
		if lit.Len() > 0 {
			t.parts = append(t.parts, templatePart{lit: lit.String()})
			lit.Reset()
		}
		t.parts = append(t.parts, templatePart{column: name})
		i += 2 + end
	}
	if lit.Len() > 0 {
		t.parts = append(t.parts, templatePart{lit: lit.String()})
	}
	if len(t.parts) == 0 {
		return Template{}, fmt.Errorf("topic template is empty")
	}
	return t, nil
}

// String returns the template as written.
func (t Template) String() string { return t.src }

// Columns lists the columns the template references, in order.
func (t Template) Columns() []string {
	var cols []string
	for _, p := range t.parts {
		if p.column != "" {
			cols = append(cols, p.column)
		}
	}
	return cols
}

// ValidTopic reports why name is not a legal Kafka topic name, or nil.
// Kafka allows [a-zA-Z0-9._-], 1 to 249 characters, and neither "." nor "..".
func ValidTopic(name string) error {
	if name == "" {
		return fmt.Errorf("topic name is empty")
	}
	if len(name) > 249 {
		return fmt.Errorf("topic name is %d characters long, Kafka allows at most 249", len(name))
	}
	if name == "." || name == ".." {
		return fmt.Errorf("topic name %q is not allowed", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q has character %q at offset %d; Kafka allows only [a-zA-Z0-9._-]", truncate(name, 80), c, i)
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
