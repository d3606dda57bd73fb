package pgcatalog

import "testing"

func TestPubRelSQL(t *testing.T) {
	cases := []struct {
		name string
		rel  pubRel
		want string
	}{
		{"whole table", pubRel{schema: "public", table: "outbox"}, `"public"."outbox"`},
		{"inheritance parent", pubRel{schema: "public", table: "outbox", inherited: true}, `ONLY "public"."outbox"`},
		{"column list", pubRel{schema: "app", table: "Outbox", columns: []string{"id", "Key"}}, `"app"."Outbox" ("id", "Key")`},
		{"row filter without parentheses", pubRel{schema: "public", table: "orders", filter: "active"}, `"public"."orders" WHERE (active)`},
		{"both", pubRel{schema: "public", table: "orders", columns: []string{"id"}, filter: "(total > (0)::numeric)"},
			`"public"."orders" ("id") WHERE ((total > (0)::numeric))`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.rel.sql(); got != c.want {
				t.Errorf("sql() = %s, want %s", got, c.want)
			}
		})
	}
}
