package explore

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// charsOf is the non-ASCII text the rows of a database in encoding enc
// hold: what that encoding has (LATIN1 has no €, WIN1252 no ✓).
func charsOf(enc string) string {
	switch enc {
	case "LATIN1":
		return "café ü ß"
	case "WIN1252":
		return "café € ü ß"
	}
	return "café € ü ß ✓ 日本"
}

// noteOf is the payload's note (harness.Shape.Note) in encoding enc.
func noteOf(enc string) string { return charsOf(enc) + ` "quoted"` }

// roleSettings is what ALTER ROLE sets on walrelay's role for each value
// of the role dimension, in a database of encoding enc: a client encoding
// other than the database's (LATIN1 holds none of € ✓ 日本), the DateStyle,
// bytea_output and statement_timeout a DBA may have set.
func roleSettings(role, enc string) (name, value string) {
	switch role {
	case "client_encoding":
		if enc == "LATIN1" {
			return role, "WIN1252"
		}
		return role, "LATIN1"
	case "DateStyle":
		return role, "SQL, DMY"
	case "bytea_output":
		return role, "escape"
	case "statement_timeout":
		return role, "100ms"
	}
	return "", ""
}

// newEnv creates the case's database in its encoding (C locale, from
// template0) and its role, and sets x.e and x.relayDSN.
//
// N.B. pgx sets no client_encoding: a session of a LATIN1 database would
// take pgx's UTF-8 bytes for LATIN1 characters. The harness's sessions (the
// writers, the read-back that is the oracle) ask for UTF8; walrelay gets
// the database's DSN as a user would write it, without.
func (x *explorer) newEnv() {
	t, c := x.t, x.c
	b := testbed.Get(t)
	admin := b.PGURL()
	x.relayRole()
	name := "x_" + harness.Uniq()
	b.Exec(t, admin, fmt.Sprintf("CREATE DATABASE %s ENCODING '%s' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0", name, c["encoding"]))
	t.Cleanup(func() {
		if err := testbed.DropDatabase(context.Background(), admin, name); err != nil {
			t.Errorf("drop the case's database: %v", err)
		}
	})
	dsn, err := testbed.WithDatabase(admin, name)
	if err != nil {
		t.Fatal(err)
	}
	x.e = &harness.Env{Bed: b, Bin: relayBin, DSN: harness.DSNVia(t, dsn, "", map[string]string{"client_encoding": "UTF8"}),
		Slot: "s_" + harness.Uniq(), Pub: "p_" + harness.Uniq(), Prefix: "t" + harness.Uniq()}
	b.Exec(t, x.e.DSN, harness.OutboxDDL)
	var enc string
	if err := b.QueryRow(t, x.e.DSN, `SELECT pg_encoding_to_char(encoding) FROM pg_database WHERE datname = current_database()`).Scan(&enc); err != nil {
		t.Fatal(err)
	}
	if enc != c["encoding"] {
		t.Fatalf("database %s has encoding %s, the case draws %s", name, enc, c["encoding"])
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if x.role != "" {
		u.User = url.UserPassword(x.role, x.rolePassword)
	}
	x.relayDSN = u.String()
}

// relayRole creates walrelay's own role (a superuser, like the harness's)
// with the case's ALTER ROLE setting, if it draws one. Created before the
// database, it is dropped after it: nothing it owns is left.
func (x *explorer) relayRole() {
	t, b := x.t, testbed.Get(x.t)
	name, value := roleSettings(x.c["role"], x.c["encoding"])
	if name == "" {
		return
	}
	x.role, x.rolePassword = "r_"+harness.Uniq(), harness.Uniq()+harness.Uniq()
	b.Exec(t, b.PGURL(), fmt.Sprintf("CREATE ROLE %s LOGIN SUPERUSER REPLICATION PASSWORD '%s'", x.role, x.rolePassword))
	role := x.role
	t.Cleanup(func() {
		if err := testbed.Exec(context.Background(), b.PGURL(), "DROP ROLE IF EXISTS "+role); err != nil {
			t.Logf("drop role %s: %v", role, err)
		}
	})
	b.Exec(t, b.PGURL(), fmt.Sprintf("ALTER ROLE %s SET %s = '%s'", x.role, name, value))
}

// alterColumns gives the outbox tables the column types the case draws,
// after the writers' Prepare made them. The writers insert the aggregate
// type as text: an enum gets the assignment cast a DBA would add.
func (x *explorer) alterColumns() {
	t, e, s := x.t, x.e, x.shape
	var ddl []string
	alter := func(cols ...string) {
		for _, tb := range s.Tables {
			ddl = append(ddl, fmt.Sprintf("ALTER TABLE %s %s", tb, strings.Join(cols, ", ")))
		}
	}
	switch x.c["coltype"] {
	case "domain":
		ddl = append(ddl, "CREATE DOMAIN explore_id AS "+s.IDType, "CREATE DOMAIN explore_key AS "+s.KeyType,
			"CREATE DOMAIN explore_aggtype AS text CHECK (VALUE <> '')")
		cols := []string{"ALTER COLUMN aggregateid TYPE explore_key", "ALTER COLUMN aggregatetype TYPE explore_aggtype"}
		if s.Partitioning != "hash" {
			// N.B. a partition key column cannot change its type.
			cols = append(cols, "ALTER COLUMN id TYPE explore_id")
		}
		alter(cols...)
	case "enum":
		ddl = append(ddl, fmt.Sprintf("CREATE TYPE explore_aggtype AS ENUM ('%s', '%s')", e.AggType(0), e.AggType(1)),
			"CREATE CAST (text AS explore_aggtype) WITH INOUT AS ASSIGNMENT")
		alter("ALTER COLUMN aggregatetype TYPE explore_aggtype USING aggregatetype::explore_aggtype")
	case "citext":
		ddl = append(ddl, "CREATE EXTENSION IF NOT EXISTS citext")
		cols := []string{"ALTER COLUMN aggregatetype TYPE citext"}
		if s.KeyType == "text" {
			cols = append(cols, "ALTER COLUMN aggregateid TYPE citext")
		}
		alter(cols...)
	}
	for _, q := range ddl {
		e.Bed.Exec(t, e.DSN, q)
	}
}

// addChars makes every outbox row hold the encoding's characters in its
// event type (a header) and, for a text key, in its key: a trigger adds
// them as the row is inserted (the payload has them from Shape.Note).
func (x *explorer) addChars() {
	t, e := x.t, x.e
	x.eventType = "OrderCreated " + charsOf(x.c["encoding"])
	x.charsFunction("aggregateid")
	for _, tb := range x.shape.Tables {
		e.Bed.Exec(t, e.DSN, fmt.Sprintf("CREATE TRIGGER explore_chars BEFORE INSERT ON %s FOR EACH ROW EXECUTE FUNCTION explore_chars()", tb))
	}
}

// charsFunction (re)creates the trigger function of addChars for the key
// column keyCol.
func (x *explorer) charsFunction(keyCol string) {
	chars := charsOf(x.c["encoding"])
	body := fmt.Sprintf("NEW.type := NEW.type || ' %s';", chars)
	if x.shape.KeyType == "text" {
		body += fmt.Sprintf(" NEW.%[1]s := NEW.%[1]s || ' %[2]s';", keyCol, chars)
	}
	x.e.Bed.Exec(x.t, x.e.DSN, `CREATE OR REPLACE FUNCTION explore_chars() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN `+body+` RETURN NEW; END $f$`)
}

// checkChars reads an event type back through a UTF-8 session: the oracle
// of the eventType header is what the database holds.
func (x *explorer) checkChars() {
	t, e := x.t, x.e
	var got string
	q := fmt.Sprintf("SELECT coalesce((SELECT type FROM %s LIMIT 1), $1)", x.shape.Tables[0])
	if err := e.Bed.QueryRow(t, e.DSN, q, x.eventType).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != x.eventType {
		t.Fatalf("the outbox holds event type %q, the case wrote %q", got, x.eventType)
	}
}
