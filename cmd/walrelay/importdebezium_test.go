package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// base is a Debezium connector with the Outbox Event Router, as the REST
// API takes it; each case edits it.
func baseConnector() map[string]string {
	return map[string]string{
		"connector.class":                "io.debezium.connector.postgresql.PostgresConnector",
		"database.hostname":              "db.example",
		"database.port":                  "6543",
		"database.user":                  "relay",
		"database.password":              "s3cr3t-pw",
		"database.dbname":                "shop",
		"topic.prefix":                   "shop",
		"plugin.name":                    "pgoutput",
		"slot.name":                      "dbz_slot",
		"publication.name":               "dbz_pub",
		"table.include.list":             "public.outbox",
		"key.converter":                  "org.apache.kafka.connect.storage.StringConverter",
		"value.converter":                "org.apache.kafka.connect.json.JsonConverter",
		"value.converter.schemas.enable": "false",
		"transforms":                     "outbox",
		"transforms.outbox.type":         "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.table.fields.additional.placement": "type:header:eventType",
	}
}

func TestImportDebezium(t *testing.T) {
	tests := []struct {
		name string
		edit func(m map[string]string)
		want map[string]string // flag -> value that must be printed
		bad  []string          // options that must be listed as unsupported
	}{
		{
			name: "defaults of the router",
			want: map[string]string{
				"pg-url": "postgres://relay@db.example:6543/shop", "slot": "dbz_slot", "publication": "dbz_pub",
				"table": "public.outbox", "key-converter": "string", "value-converter": "json",
				"id-column": "id", "key-column": "aggregateid", "payload-column": "payload",
				"header-columns": "type:eventType", "envelope-columns": "", "topic": "outbox.event.${aggregatetype}",
				"tombstone-on-empty-payload": "false",
			},
		},
		{
			name: "json-schema is JsonConverter's default",
			edit: func(m map[string]string) {
				delete(m, "value.converter.schemas.enable")
				m["key.converter"] = "org.apache.kafka.connect.json.JsonConverter"
			},
			want: map[string]string{"key-converter": "json-schema", "value-converter": "json-schema"},
		},
		{
			name: "route.by.field with the default regex is a template",
			edit: func(m map[string]string) {
				m["transforms.outbox.route.by.field"] = "kind"
				m["transforms.outbox.route.topic.replacement"] = "events.${routedByValue}.v1"
			},
			want: map[string]string{"topic": "events.${kind}.v1"},
		},
		{
			name: "custom regex routes like RegexRouter",
			edit: func(m map[string]string) {
				m["transforms.outbox.route.topic.regex"] = `(?<domain>[^.]+)\.(?<rest>.*)`
				m["transforms.outbox.route.topic.replacement"] = "dom.${domain}"
			},
			want: map[string]string{"topic-regex": `(?<domain>[^.]+)\.(?<rest>.*)`, "topic": "dom.${domain}", "route-column": "aggregatetype"},
		},
		{
			name: "envelope with aliases, header without alias, tombstones",
			edit: func(m map[string]string) {
				m["transforms.outbox.table.fields.additional.placement"] = "type:envelope:eventType,id:envelope,aggregatetype:header"
				m["transforms.outbox.route.tombstone.on.empty.payload"] = "true"
				m["transforms.outbox.table.field.event.key"] = "key"
			},
			want: map[string]string{"envelope-columns": "type:eventType,id:id", "header-columns": "aggregatetype:aggregatetype",
				"tombstone-on-empty-payload": "true", "key-column": "key"},
		},
		{
			name: "bytea payload",
			edit: func(m map[string]string) { m["value.converter"] = "io.debezium.converters.BinaryDataConverter" },
			want: map[string]string{"value-converter": "bytes"},
		},
		{
			name: "ssl settings and status interval",
			edit: func(m map[string]string) {
				m["database.sslmode"] = "verify-full"
				m["database.sslrootcert"] = "/etc/ca.pem"
				m["status.update.interval.ms"] = "2500"
			},
			want: map[string]string{"pg-url": "postgres://relay@db.example:6543/shop?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem", "status-interval": "2500ms"},
		},
		{
			name: "unsupported options are all listed",
			edit: func(m map[string]string) {
				m["transforms.outbox.table.expand.json.payload"] = "true"
				m["value.converter"] = "org.apache.kafka.connect.storage.StringConverter"
				m["transforms.outbox.table.fields.additional.placement"] = "part:partition,p2:partition"
				m["transforms.outbox.table.field.event.timestamp"] = "ts"
				m["time.precision.mode"] = "connect"
				m["key.converter"] = "io.confluent.connect.avro.AvroConverter"
				m["errors.tolerance"] = "all"
				m["table.include.list"] = "public.outbox_.*"
				delete(m, "plugin.name")
			},
			bad: []string{"table.expand.json.payload", "2 partition placements", "time.precision.mode", "AvroConverter", "errors.tolerance", "public.outbox_.*", "decoderbufs"},
		},
		{
			name: "partition placement, event timestamp, expanded JSON",
			edit: func(m map[string]string) {
				m["value.converter"], m["value.converter.schemas.enable"] = "org.apache.kafka.connect.json.JsonConverter", "false"
				m["transforms.outbox.table.fields.additional.placement"] = "type:header:eventType,part:partition"
				m["transforms.outbox.table.field.event.timestamp"] = "occurred"
				m["transforms.outbox.table.expand.json.payload"] = "true"
				m["transforms.outbox.table.json.payload.null.behavior"] = "optional_bytes"
			},
			want: map[string]string{"partition-column": "part", "timestamp-column": "occurred", "header-columns": "type:eventType",
				"expand-json-payload": "true", "expand-json-null-as-bytes": "true", "value-converter": "json"},
		},
		{
			name: "a converter left to the worker is refused",
			edit: func(m map[string]string) { delete(m, "key.converter") },
			bad:  []string{"key.converter", "worker"},
		},
		{
			name: "another transform is refused",
			edit: func(m map[string]string) {
				m["transforms"] = "outbox,route"
				m["transforms.route.type"] = "org.apache.kafka.connect.transforms.RegexRouter"
			},
			bad: []string{"transforms.route.type"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := baseConnector()
			if tc.edit != nil {
				tc.edit(m)
			}
			imp := importDebezium(m)
			all := strings.Join(imp.unsupported, "\n")
			if tc.bad == nil && len(imp.unsupported) > 0 {
				t.Fatalf("unsupported:\n%s", all)
			}
			for _, b := range tc.bad {
				if !strings.Contains(all, b) {
					t.Errorf("unsupported list lacks %q:\n%s", b, all)
				}
			}
			got := map[string]string{}
			for _, s := range imp.settings {
				got[s.flag] = s.value
			}
			for f, v := range tc.want {
				if got[f] != v {
					t.Errorf("--%s = %q, want %q", f, got[f], v)
				}
			}
			for _, s := range imp.settings {
				if strings.Contains(s.value, "s3cr3t") {
					t.Errorf("--%s echoes the password: %q", s.flag, s.value)
				}
			}
			if strings.Contains(all, "s3cr3t") || strings.Contains(strings.Join(imp.notes, "\n"), "s3cr3t") {
				t.Errorf("the password is echoed")
			}
		})
	}
}

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
		if cfg.keyConverter != "json" || cfg.valueConverter != "json-schema" || cfg.topic != "t.${aggregatetype}" || cfg.pgURL != "postgres://u@h:5432/d" {
			t.Errorf("%s: key %q value %q topic %q url %q", name, cfg.keyConverter, cfg.valueConverter, cfg.topic, cfg.pgURL)
		}
		// N.B. host h without sslmode: run refuses it unless told, and the
		// import says so.
		if !strings.Contains(out.String(), "# the connection is not sslmode=verify-full") {
			t.Errorf("%s: no note that the imported connection is unverified:\n%s", name, out.String())
		}
		cfg.pgVerifiedTLS = false
		if _, _, _, err := cfg.stages(); err != nil {
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
