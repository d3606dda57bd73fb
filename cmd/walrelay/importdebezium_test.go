package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportDebeziumCommand runs the sub-command on the three file forms:
// each prints the same settings, the password nowhere, and the flags
// parse in `walrelay run`'s flag set.
func TestImportDebeziumCommand(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"rest.json": `{"name": "orders", "config": {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
			"database.hostname": "h", "database.port": 5432, "database.user": "u", "database.password": "pw-XYZ", "database.dbname": "d",
			"plugin.name": "pgoutput", "table.include.list": "public.outbox", "key.converter": "org.apache.kafka.connect.json.JsonConverter",
			"key.converter.schemas.enable": false, "value.converter": "org.apache.kafka.connect.json.JsonConverter",
			"transforms": "o", "transforms.o.type": "io.debezium.transforms.outbox.EventRouter",
			"transforms.o.route.topic.replacement": "t.${routedByValue}"}}`,
		"flat.json": `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
			"database.hostname": "h", "database.port": "5432", "database.user": "u", "database.password": "pw-XYZ", "database.dbname": "d",
			"plugin.name": "pgoutput", "table.include.list": "public.outbox", "key.converter": "org.apache.kafka.connect.json.JsonConverter",
			"key.converter.schemas.enable": "false", "value.converter": "org.apache.kafka.connect.json.JsonConverter",
			"transforms": "o", "transforms.o.type": "io.debezium.transforms.outbox.EventRouter",
			"transforms.o.route.topic.replacement": "t.${routedByValue}"}`,
		"c.properties": "# a comment\nname=orders\nconnector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"database.hostname = h\ndatabase.port:5432\ndatabase.user=u\ndatabase.password=pw-XYZ\ndatabase.dbname=d\nplugin.name=pgoutput\n" +
			"table.include.list=public.outbox\nkey.converter=org.apache.kafka.connect.json.JsonConverter\nkey.converter.schemas.enable=false\n" +
			"value.converter=org.apache.kafka.connect.json.\\\n    JsonConverter\ntransforms=o\ntransforms.o.type=io.debezium.transforms.outbox.EventRouter\n" +
			"transforms.o.route.topic.replacement=t.${routedByValue}\n",
	}
	var outputs []string
	for _, name := range []string{"rest.json", "flat.json", "c.properties"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(files[name]), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		if code := realMain([]string{"import-debezium", "--format", "flags", path}, &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errb.String())
		}
		if strings.Contains(out.String(), "pw-XYZ") {
			t.Fatalf("%s: the password is printed:\n%s", name, out.String())
		}
		var flags []string
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(line, "--") {
				k, v, _ := strings.Cut(line, "=")
				if len(v) >= 2 && v[0] == '\'' {
					v = strings.ReplaceAll(v[1:len(v)-1], `'\''`, "'")
				}
				flags = append(flags, k+"="+v)
			}
		}
		var cfg config
		fs := newFlagSet("run", &cfg)
		if err := fs.Parse(flags); err != nil {
			t.Fatalf("%s: walrelay run does not take its flags: %v", name, err)
		}
		if cfg.Decode.KeyFormat != "json" || cfg.Decode.ValueFormat != "json-schema" || cfg.Decode.Topic != "t.${aggregatetype}" || cfg.Replication.ConnString != "postgres://u@h:5432/d" {
			t.Errorf("%s: key %q value %q topic %q url %q", name, cfg.Decode.KeyFormat, cfg.Decode.ValueFormat, cfg.Decode.Topic, cfg.Replication.ConnString)
		}
		// N.B. host h without sslmode: run refuses it unless told, and the
		// import says so.
		if !strings.Contains(out.String(), "# the connection is not sslmode=verify-full") {
			t.Errorf("%s: no note that the imported connection is unverified:\n%s", name, out.String())
		}
		cfg.Replication.RequireVerifiedTLS = false
		if _, err := cfg.stages(); err != nil {
			t.Errorf("%s: the imported settings are invalid: %v", name, err)
		}
		outputs = append(outputs, strings.Join(flags, "\n"))
	}
	if outputs[0] != outputs[1] || outputs[1] != outputs[2] {
		t.Errorf("the three forms differ:\n%s\n---\n%s\n---\n%s", outputs[0], outputs[1], outputs[2])
	}

	// Unsupported: exit 2, nothing on stdout, the option named.
	path := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(path, []byte(`{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "plugin.name": "pgoutput",
		"table.include.list": "public.outbox", "database.password": "pw-XYZ", "key.converter": "org.apache.kafka.connect.storage.StringConverter",
		"value.converter": "org.apache.kafka.connect.storage.StringConverter", "transforms": "o",
		"transforms.o.type": "io.debezium.transforms.outbox.EventRouter", "transforms.o.table.expand.json.payload": "true"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := realMain([]string{"import-debezium", path}, &out, &errb); code != exitConfig {
		t.Fatalf("exit %d, want %d", code, exitConfig)
	}
	if out.Len() != 0 || !strings.Contains(errb.String(), "table.expand.json.payload") || strings.Contains(errb.String(), "pw-XYZ") {
		t.Errorf("stdout %q, stderr %q", out.String(), errb.String())
	}
}
