package debezium

import (
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
			imp := Import(m)
			all := strings.Join(imp.Unsupported, "\n")
			if tc.bad == nil && len(imp.Unsupported) > 0 {
				t.Fatalf("unsupported:\n%s", all)
			}
			for _, b := range tc.bad {
				if !strings.Contains(all, b) {
					t.Errorf("unsupported list lacks %q:\n%s", b, all)
				}
			}
			got := map[string]string{}
			for _, s := range imp.Settings {
				got[s.Flag] = s.Value
			}
			for f, v := range tc.want {
				if got[f] != v {
					t.Errorf("--%s = %q, want %q", f, got[f], v)
				}
			}
			for _, s := range imp.Settings {
				if strings.Contains(s.Value, "s3cr3t") {
					t.Errorf("--%s echoes the password: %q", s.Flag, s.Value)
				}
			}
			if strings.Contains(all, "s3cr3t") || strings.Contains(strings.Join(imp.Notes, "\n"), "s3cr3t") {
				t.Errorf("the password is echoed")
			}
		})
	}
}
