package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestSourceFlag: --source sets the stages' sources; a wrong value, an
// empty prefix or a bytes value with messages is refused with the values
// allowed.
func TestSourceFlag(t *testing.T) {
	cases := []struct {
		args                        []string
		messages, noTables, invalid bool
		want                        string
	}{
		{args: nil},
		{args: []string{"--source", "tables"}},
		{args: []string{"--source", "messages"}, messages: true, noTables: true},
		{args: []string{"--source", "tables,messages"}, messages: true},
		{args: []string{"--source", "messages, tables"}, messages: true},
		{args: []string{"--source", "rows"}, invalid: true, want: `--source "rows": want tables, messages or tables,messages`},
		{args: []string{"--source", ""}, invalid: true, want: `want tables, messages or tables,messages`},
		{args: []string{"--source", "messages", "--message-prefix", ""}, invalid: true, want: "--message-prefix is empty"},
		{args: []string{"--source", "messages", "--value-converter", "bytes"}, invalid: true, want: "a message's payload is JSON"},
		{args: []string{"--source", "messages", "--table", ""}, messages: true, noTables: true},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var cfg config
			fs := newFlagSet("run", &cfg)
			if err := kit.Parse(fs, append([]string{"--pg-url", "postgres://localhost/db"}, c.args...), &bytes.Buffer{}); err != nil {
				t.Fatal(err)
			}
			pc, err := cfg.stages()
			rc, dc := pc.Replication, pc.Decode
			if c.invalid {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v, want one saying %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rc.Messages != c.messages || dc.Messages != c.messages || rc.NoTables != c.noTables || dc.NoTables != c.noTables {
				t.Errorf("replication messages %v no tables %v, decode %v %v; want %v %v", rc.Messages, rc.NoTables, dc.Messages, dc.NoTables, c.messages, c.noTables)
			}
			if dc.MessagePrefix != "outbox" {
				t.Errorf("message prefix %q, want the default outbox", dc.MessagePrefix)
			}
		})
	}
}

// TestSetupPrintsEmit: setup --print --source messages prints an empty
// publication and walrelay.emit writing the configured column names; a
// mapping emit cannot fill is refused.
func TestSetupPrintsEmit(t *testing.T) {
	code, out, errOut := run("setup", "--print", "--source", "messages", "--role", "", "--id-column", "event_id", "--message-prefix", "ev")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		`CREATE PUBLICATION "walrelay";`,
		"CREATE OR REPLACE FUNCTION walrelay.emit(aggregatetype text, aggregateid text, type text, payload jsonb) RETURNS uuid",
		"pg_logical_emit_message(true, 'ev', jsonb_build_object('event_id', id, 'aggregatetype', aggregatetype, 'aggregateid', aggregateid, 'type', type, 'payload', payload)::text)",
		"GRANT USAGE ON SCHEMA walrelay TO PUBLIC;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("setup --print lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "GRANT SELECT") || strings.Contains(out, "FOR TABLE") {
		t.Errorf("setup --print --source messages grants or publishes a table:\n%s", out)
	}
	code, _, errOut = run("setup", "--print", "--source", "messages", "--role", "", "--header-columns", "tenant:tenant")
	if code != 2 || !strings.Contains(errOut, `the mapping also names "tenant" (--header-columns)`) {
		t.Errorf("setup with an unwritten header column: exit %d, %s", code, errOut)
	}
	code, out, _ = run("setup", "--print", "--role", "")
	if code != 0 || strings.Contains(out, "walrelay.emit") {
		t.Errorf("setup --print of the table source: exit %d, prints walrelay.emit:\n%s", code, out)
	}
}
