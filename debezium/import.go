package debezium

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/replication"
)

// Setting is one walrelay flag (its name, without "--") and its value.
type Setting struct{ Flag, Value string }

// Result is what Import made of a connector configuration: the settings,
// notes for the reader, and the options walrelay does not support (when
// any, the settings relay other records than the connector: print none).
type Result struct {
	Settings    []Setting
	Notes       []string
	Unsupported []string
}

const (
	postgresConnector = "io.debezium.connector.postgresql.PostgresConnector"
	eventRouter       = "io.debezium.transforms.outbox.EventRouter"
	defaultTopicRegex = "(?<routedByValue>.*)"
)

// ignoredOptions change how Debezium runs, not the records it writes (or
// are Kafka Connect's own): walrelay has no use for them.
var ignoredOptions = map[string]bool{
	"name": true, "tasks.max": true, "topic.prefix": true, "database.server.name": true,
	"snapshot.mode": true, "publication.autocreate.mode": true,
	"heartbeat.interval.ms": true, "poll.interval.ms": true, "max.batch.size": true,
	"max.queue.size": true, "max.queue.size.in.bytes": true, "tombstones.on.delete": true,
	"decimal.handling.mode": true, "time.precision.mode": true, "hstore.handling.mode": true,
	"interval.handling.mode": true, "include.unknown.datatypes": true, "schema.refresh.mode": true,
	"extended.headers.enabled": true, "database.tcpKeepAlive": true,
	"retriable.restart.connector.wait.ms": true, "errors.max.retries": true,
	"slot.max.retries": true, "slot.retry.delay.ms": true, "snapshot.fetch.size": true,
	"key.converter.schemas.cache.size": true, "value.converter.schemas.cache.size": true,
}

// secretOption reports whether an option holds a secret, never printed.
func secretOption(k string) bool {
	k = strings.ToLower(k)
	return strings.Contains(k, "password") || strings.Contains(k, "secret") || strings.HasSuffix(k, ".key") && !strings.Contains(k, "field")
}

// identRE matches a table.include.list entry walrelay can take as a
// table name: schema.table of plain identifiers (Debezium's entries are
// regular expressions; these match only themselves, '.' aside).
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*\.[A-Za-z_][A-Za-z0-9_$]*$`)

// Import maps the options of a Debezium PostgreSQL connector with the
// Outbox Event Router to walrelay's settings.
func Import(props map[string]string) Result {
	var imp Result
	used := map[string]bool{}
	get := func(k, def string) string {
		used[k] = true
		if v, ok := props[k]; ok {
			return v
		}
		return def
	}
	bad := func(k, why string) {
		used[k] = true
		v := props[k]
		if secretOption(k) {
			v = "(secret, not shown)"
		}
		imp.Unsupported = append(imp.Unsupported, fmt.Sprintf("%s=%s: %s", k, v, why))
	}
	set := func(f, v string) { imp.Settings = append(imp.Settings, Setting{f, v}) }

	if c := get("connector.class", ""); c != postgresConnector && c != "PostgresConnector" {
		bad("connector.class", "walrelay replaces "+postgresConnector)
	}
	if p := get("plugin.name", "decoderbufs"); p != "pgoutput" {
		if _, ok := props["plugin.name"]; !ok {
			imp.Unsupported = append(imp.Unsupported, "plugin.name is not set: Debezium then uses decoderbufs; walrelay reads pgoutput only (a slot made with pgoutput)")
		} else {
			bad("plugin.name", "walrelay reads pgoutput only")
		}
	}

	// Connection. N.B. the password is never printed: walrelay takes it
	// from a file (--pg-url-file) or PGPASSWORD.
	u := &url.URL{Scheme: "postgres", Host: get("database.hostname", "localhost") + ":" + get("database.port", "5432"),
		Path: "/" + get("database.dbname", "")}
	if user := get("database.user", ""); user != "" {
		u.User = url.User(user)
	}
	q := url.Values{}
	if m := get("database.sslmode", ""); m != "" {
		q.Set("sslmode", m)
	}
	for _, k := range []string{"sslrootcert", "sslcert", "sslkey"} {
		if v := get("database."+k, ""); v != "" {
			q.Set(k, v)
		}
	}
	u.RawQuery = q.Encode()
	set("pg-url", u.String())
	if _, _, err := replication.TLSPolicy("--pg-url", u.String(), true); err != nil {
		imp.Notes = append(imp.Notes, "the connection is not sslmode=verify-full and walrelay run refuses that for a host other than loopback (--pg-require-verified-tls): set database.sslmode=verify-full and database.sslrootcert, or add WALRELAY_PG_REQUIRE_VERIFIED_TLS=false to accept an unverified connection")
	}
	if _, ok := props["database.password"]; ok {
		used["database.password"] = true
		imp.Notes = append(imp.Notes, "database.password is not printed: write the URL with the password to a file readable only by walrelay and set WALRELAY_PG_URL_FILE to it instead of WALRELAY_PG_URL, or give it in PGPASSWORD")
	}
	for k := range props {
		if strings.HasPrefix(k, "database.") && secretOption(k) && !used[k] {
			bad(k, "walrelay takes no such secret; it is not shown")
		}
	}
	set("slot", get("slot.name", "debezium"))
	set("publication", get("publication.name", "dbz_publication"))
	if ms := get("status.update.interval.ms", ""); ms != "" {
		if n, err := strconv.Atoi(ms); err == nil && n >= 100 {
			set("status-interval", strconv.Itoa(n)+"ms")
		} else {
			bad("status.update.interval.ms", "walrelay's --status-interval takes 100ms or more")
		}
	}
	if v := get("slot.drop.on.stop", "false"); v != "false" {
		bad("slot.drop.on.stop", "walrelay never drops its slot (a dropped slot loses events)")
	}
	if v := get("binary.handling.mode", "bytes"); v != "bytes" {
		bad("binary.handling.mode", "walrelay writes a bytea as its bytes only (bytes)")
	}
	tables := get("table.include.list", "")
	if tables == "" {
		imp.Unsupported = append(imp.Unsupported, "table.include.list is not set: name the outbox table(s) (schema.table) so that walrelay relays those only")
	} else {
		var names []string
		for _, t := range cli.SplitList(tables) {
			if !identRE.MatchString(t) {
				bad("table.include.list", fmt.Sprintf("entry %q is a regular expression or not schema-qualified; walrelay takes table names (schema.table)", t))
			}
			names = append(names, t)
		}
		set("table", strings.Join(names, ","))
	}

	importConverters(props, get, bad, set)
	importRouter(props, &imp, get, bad, set)

	var rest []string
	for k := range props {
		if used[k] {
			continue
		}
		if ignoredOptions[k] || strings.HasPrefix(k, "topic.creation.") {
			continue
		}
		rest = append(rest, k)
	}
	sort.Strings(rest)
	for _, k := range rest {
		bad(k, "not known to walrelay's import: it may change the records (remove it if it does not)")
	}
	return imp
}

// importConverters maps key.converter and value.converter (and their
// schemas.enable) to --key-converter and --value-converter.
func importConverters(props map[string]string, get func(k, def string) string, bad func(k, why string), set func(f, v string)) {
	for _, side := range []string{"key", "value"} {
		k := side + ".converter"
		class, ok := props[k]
		if !ok {
			get(k, "")
			bad(k, "not set, so the Connect worker's "+k+" applies: copy it (and its "+k+".* options) from the worker's configuration into this file")
			continue
		}
		get(k, "")
		get(k+".schemas.enable", "") // N.B. only JsonConverter reads it
		var name string
		switch class {
		case "org.apache.kafka.connect.storage.StringConverter":
			name = decode.FormatString
			if enc := get(k+".encoding", "UTF-8"); !strings.EqualFold(enc, "UTF-8") && !strings.EqualFold(enc, "UTF8") {
				bad(k+".encoding", "walrelay writes UTF-8")
			}
		case "org.apache.kafka.connect.json.JsonConverter":
			name = decode.FormatJSONSchema
			switch get(k+".schemas.enable", "true") {
			case "false":
				name = decode.FormatJSON
			case "true":
			default:
				bad(k+".schemas.enable", "want true or false")
			}
			if v := get(k+".replace.null.with.default", "true"); v != "true" {
				bad(k+".replace.null.with.default", "walrelay writes no column defaults")
			}
			if v := get(k+".decimal.format", "BASE64"); v != "BASE64" {
				bad(k+".decimal.format", "walrelay maps no decimal columns")
			}
		case "org.apache.kafka.connect.converters.ByteArrayConverter", "io.debezium.converters.BinaryDataConverter", "io.debezium.converters.ByteBufferConverter":
			if side == "key" {
				bad(k, "the key is a text or integer column; "+class+" takes bytes")
				continue
			}
			name = decode.FormatBytes
		default:
			bad(k, "walrelay writes string (StringConverter), json and json-schema (JsonConverter) and bytes (ByteArrayConverter, BinaryDataConverter)")
			continue
		}
		set(side+"-converter", name)
	}
	if h, ok := props["header.converter"]; ok && h != "org.apache.kafka.connect.storage.SimpleHeaderConverter" {
		bad("header.converter", "walrelay writes headers as SimpleHeaderConverter does")
	} else {
		get("header.converter", "")
	}
}

// importRouter maps the one Outbox Event Router of transforms.
func importRouter(props map[string]string, imp *Result, get func(k, def string) string, bad func(k, why string), set func(f, v string)) {
	aliases := cli.SplitList(get("transforms", ""))
	var router string
	for _, a := range aliases {
		t := get("transforms."+a+".type", "")
		if t == eventRouter && router == "" {
			router = a
			continue
		}
		bad("transforms."+a+".type", "walrelay applies one Outbox Event Router and no other transform")
	}
	if router == "" {
		imp.Unsupported = append(imp.Unsupported, "transforms: no "+eventRouter+": walrelay relays outbox events only")
		return
	}
	p := "transforms." + router + "."
	set("id-column", get(p+"table.field.event.id", "id"))
	set("key-column", get(p+"table.field.event.key", "aggregateid"))
	set("payload-column", get(p+"table.field.event.payload", "payload"))
	get(p+"table.field.event.type", "") // N.B. used by placements only
	if ts := get(p+"table.field.event.timestamp", ""); ts != "" {
		// N.B. the router reads the column as a number of the
		// time.precision.mode's logical type: the adaptive modes give a
		// timestamp column io.debezium.time.(Micro)Timestamp; connect's
		// java.util.Date fails Debezium's task at every record.
		if m := get("time.precision.mode", "adaptive"); m != "adaptive" && m != "adaptive_time_microseconds" {
			bad("time.precision.mode", "with table.field.event.timestamp Debezium takes a timestamp column only in the adaptive modes (connect fails each record); walrelay reads it as adaptive does")
		}
		set("timestamp-column", ts)
	}
	if v := get(p+"table.field.event.schema.version", ""); v != "" {
		set("schema-version-column", v)
	}
	// N.B. the json-schema envelope's struct is named after it.
	if v := get("topic.prefix", ""); v != "" {
		set("debezium-topic-prefix", v)
	}
	switch v := get(p+"table.expand.json.payload", "false"); v {
	case "false":
	case "true":
		set("expand-json-payload", "true")
		// N.B. the converter decides how an expanded payload is written:
		// StringConverter's Struct.toString() is not reproduced.
		if props["value.converter"] != "org.apache.kafka.connect.json.JsonConverter" {
			bad(p+"table.expand.json.payload", "walrelay writes expanded payloads with JsonConverter only (value.converter); StringConverter would write Java's Struct.toString()")
		}
	default:
		bad(p+"table.expand.json.payload", "want true or false")
	}
	switch v := get(p+"table.json.payload.null.behavior", "ignore"); v {
	case "ignore":
	case "optional_bytes":
		set("expand-json-null-as-bytes", "true")
	default:
		bad(p+"table.json.payload.null.behavior", "want ignore or optional_bytes")
	}
	if v := get(p+"table.op.invalid.behavior", "warn"); v != "warn" && v != "error" {
		bad(p+"table.op.invalid.behavior", "walrelay ignores (and counts) updates of the outbox: warn or error")
	}
	if v := get(p+"table.field.additional.missing", "error"); v != "error" {
		bad(p+"table.field.additional.missing", "a missing column makes walrelay's events poison (error)")
	}
	var headers, envelope, partition []string
	for _, f := range cli.SplitList(get(p+"table.fields.additional.placement", "")) {
		parts := strings.Split(f, ":")
		if len(parts) < 2 || len(parts) > 3 {
			bad(p+"table.fields.additional.placement", fmt.Sprintf("entry %q: want column:placement[:alias]", f))
			continue
		}
		alias := parts[0]
		if len(parts) == 3 {
			alias = parts[2]
		}
		switch parts[1] {
		case "header":
			headers = append(headers, parts[0]+":"+alias)
		case "envelope":
			envelope = append(envelope, parts[0]+":"+alias)
		case "partition":
			partition = append(partition, parts[0])
		default:
			bad(p+"table.fields.additional.placement", fmt.Sprintf("entry %q: walrelay places columns in headers, the envelope and the partition only", f))
		}
	}
	set("header-columns", strings.Join(headers, ","))
	set("envelope-columns", strings.Join(envelope, ","))
	switch len(partition) {
	case 0:
	case 1:
		set("partition-column", partition[0])
	default:
		bad(p+"table.fields.additional.placement", fmt.Sprintf("%d partition placements (%s): Debezium takes the last one; keep one", len(partition), strings.Join(partition, ", ")))
	}
	importTracing(imp, props, p, get, bad, set) // tracing.go

	// N.B. with the default regex the replacement is a template over the
	// route column; anything else is routed like RegexRouter.
	by := get(p+"route.by.field", "aggregatetype")
	re := get(p+"route.topic.regex", defaultTopicRegex)
	repl := get(p+"route.topic.replacement", "outbox.event.${routedByValue}")
	if tmpl, ok := replacementTemplate(re, repl, by); ok {
		set("topic", tmpl)
	} else {
		set("topic-regex", re)
		set("topic", repl)
	}
	set("route-column", by)
	set("tombstone-on-empty-payload", get(p+"route.tombstone.on.empty.payload", "false"))
	if err := (decode.Config{TopicRegex: re, Topic: repl}).Validate(); err != nil {
		bad(p+"route.topic.regex", err.Error())
	}
}

// replacementTemplate turns a replacement over the default regex into
// walrelay's topic template, when it refers to ${routedByValue} only.
func replacementTemplate(re, repl, by string) (string, bool) {
	if re != defaultTopicRegex || strings.Contains(repl, `\`) {
		return "", false
	}
	rest := strings.ReplaceAll(repl, "${routedByValue}", "")
	if strings.Contains(rest, "$") || !utf8.ValidString(repl) {
		return "", false
	}
	return strings.ReplaceAll(repl, "${routedByValue}", "${"+by+"}"), true
}
