package decode

import (
	"maps"
	"testing"
)

// MappedColumns names each column the configuration maps with the flag
// the check at start checks it as; a column the topic names as well is
// the topic's.
func TestMappedColumns(t *testing.T) {
	base := map[string]string{"id": "--id-column", "aggregateid": "--key-column", "payload": "--payload-column", "aggregatetype": "--topic"}
	with := func(kv ...string) map[string]string {
		m := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want map[string]string
	}{
		{"defaults", Config{}, base},
		{"headers, partition, timestamp", Config{HeaderColumns: []HeaderColumn{{"type", "eventType"}}, PartitionColumn: "part", TimestampColumn: "ts"},
			with("type", "--header-columns", "part", "--partition-column", "ts", "--timestamp-column")},
		{"an envelope column the topic names too is the topic's", Config{ValueFormat: FormatJSON, EnvelopeFields: []EnvelopeField{{"aggregatetype", "t"}, {"type", "eventType"}}},
			with("type", "--envelope-columns")},
		{"json-schema envelope: route and version", Config{ValueFormat: FormatJSONSchema, SchemaNamePrefix: "p", EnvelopeFields: []EnvelopeField{{"type", "eventType"}}, SchemaVersionColumn: "v"},
			with("type", "--envelope-columns", "aggregatetype", "--topic", "v", "--schema-version-column")},
		{"json envelope: the version still checked", Config{ValueFormat: FormatJSON, EnvelopeFields: []EnvelopeField{{"type", "eventType"}}, SchemaVersionColumn: "v"},
			with("type", "--envelope-columns", "v", "--schema-version-column")},
		{"topic regex: the route column", Config{TopicRegex: "(.*)", Topic: "x.$1", RouteColumn: "route"},
			map[string]string{"id": "--id-column", "aggregateid": "--key-column", "payload": "--payload-column", "route": "--route-column"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MappedColumns(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
	if _, err := MappedColumns(Config{Topic: "a.${"}); err == nil {
		t.Error("a bad template accepted")
	}
}
