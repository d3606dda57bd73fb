package debezium

import (
	"maps"
	"testing"
)

// TestParseConnectorConfig: the three file forms give the same options;
// properties take ':' and ' ' separators, continuations and escapes.
func TestParseConnectorConfig(t *testing.T) {
	want := map[string]string{"name": "orders", "database.port": "5432", "plugin.name": "pgoutput", "a b": "x\ty\u00e9", "cont": "one two"}
	cases := []struct{ path, text string }{
		{"c.json", `{"name": "orders", "config": {"name": "orders", "database.port": 5432, "plugin.name": "pgoutput", "a b": "x\ty\u00e9", "cont": "one two", "skip": null}}`},
		{"flat.json", `{"name": "orders", "database.port": "5432", "plugin.name": "pgoutput", "a b": "x\ty\u00e9", "cont": "one two"}`},
		{"c.properties", "# comment\n! comment\nname=orders\ndatabase.port:5432\nplugin.name pgoutput\na\\ b = x\\ty\\u00e9\ncont=one \\\n    two\n"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			props, name, err := ParseConnectorConfig(c.path, []byte(c.text))
			if err != nil {
				t.Fatal(err)
			}
			if name != "orders" || !maps.Equal(props, want) {
				t.Errorf("name %q, options %q; want orders, %q", name, props, want)
			}
		})
	}
	if _, _, err := ParseConnectorConfig("c.properties", []byte("k=\\u12\n")); err == nil {
		t.Errorf("a malformed \\u escape is accepted")
	}
}
