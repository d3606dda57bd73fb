package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/replication"
)

// importDebeziumCmd is `walrelay import-debezium FILE`: it reads a Debezium
// PostgreSQL connector configuration (the JSON given to Kafka Connect's
// REST API, {"name":...,"config":{...}}, a flat JSON object, or a
// .properties file) and prints the walrelay settings that relay the same
// records, as WALRELAY_* lines (default) or flags. An option walrelay does
// not support is listed on stderr with exit 2 and nothing is printed:
// a partial configuration would relay other records. Secrets are never
// printed.
func importDebeziumCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("import-debezium", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "env", "output: env (WALRELAY_*=value lines, shell-quoted) or flags (one --flag=value a line, shell-quoted)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: walrelay import-debezium [--format env|flags] FILE\n\nPrints the walrelay settings equivalent to a Debezium PostgreSQL connector with the Outbox Event Router\n(Connect REST JSON, flat JSON or .properties). Unsupported options are listed, exit 2.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// N.B. flags may follow the file name too.
	var files []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitConfig
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(files) != 1 {
		fmt.Fprintf(stderr, "walrelay import-debezium: want one connector configuration file, got %d\n", len(files))
		return exitConfig
	}
	if *format != "env" && *format != "flags" {
		fmt.Fprintf(stderr, "walrelay import-debezium: --format %q: want env or flags\n", *format)
		return exitConfig
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		fmt.Fprintf(stderr, "walrelay import-debezium: %v\n", err)
		return exitConfig
	}
	props, name, err := parseConnectorConfig(files[0], b)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay import-debezium: read %s: %v\n", files[0], err)
		return exitConfig
	}
	imp := importDebezium(props)
	if len(imp.unsupported) > 0 {
		fmt.Fprintf(stderr, "walrelay import-debezium: %s: %d option(s) walrelay does not support; nothing printed:\n", files[0], len(imp.unsupported))
		for _, u := range imp.unsupported {
			fmt.Fprintf(stderr, "  - %s\n", u)
		}
		return exitConfig
	}
	fmt.Fprintf(stdout, "# walrelay settings imported from %s", files[0])
	if name != "" {
		fmt.Fprintf(stdout, " (connector %s)", name)
	}
	fmt.Fprintln(stdout)
	for _, n := range imp.notes {
		fmt.Fprintf(stdout, "# %s\n", n)
	}
	for _, s := range imp.settings {
		if *format == "env" {
			fmt.Fprintf(stdout, "%s=%s\n", envName(s.flag), shellQuote(s.value))
		} else {
			fmt.Fprintf(stdout, "--%s=%s\n", s.flag, shellQuote(s.value))
		}
	}
	return exitOK
}

// parseConnectorConfig reads a connector configuration: JSON (Connect's
// {"name":...,"config":{...}} or a flat object) or Java properties. It
// returns the options and the connector's name, if given.
func parseConnectorConfig(path string, b []byte) (map[string]string, string, error) {
	if t := bytes.TrimSpace(b); !strings.HasSuffix(path, ".properties") && len(t) > 0 && t[0] == '{' {
		var top map[string]json.RawMessage
		if err := json.Unmarshal(t, &top); err != nil {
			return nil, "", err
		}
		var name string
		if raw, ok := top["config"]; ok {
			if n, ok := top["name"]; ok {
				_ = json.Unmarshal(n, &name)
			}
			top = nil
			if err := json.Unmarshal(raw, &top); err != nil {
				return nil, "", fmt.Errorf("config: %w", err)
			}
		}
		props := map[string]string{}
		for k, raw := range top {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, "", err
			}
			switch x := v.(type) {
			case string:
				props[k] = x
			case bool:
				props[k] = strconv.FormatBool(x)
			case float64, json.Number:
				props[k] = strings.TrimSpace(string(raw))
			case nil:
			default:
				return nil, "", fmt.Errorf("option %s: want a string, number or boolean, got %s", k, raw)
			}
		}
		if n, ok := props["name"]; ok && name == "" {
			name = n
		}
		return props, name, nil
	}
	props, err := parseProperties(b)
	return props, props["name"], err
}

// parseProperties reads Java's .properties format: key=value, key:value
// or key value lines, # and ! comments, a trailing \ continuing a line,
// and the escapes \t \n \r \f \uXXXX.
func parseProperties(b []byte) (map[string]string, error) {
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	var logical strings.Builder
	for sc.Scan() {
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if logical.Len() == 0 && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		// An odd number of trailing backslashes continues the line.
		n := len(line) - len(strings.TrimRight(line, `\`))
		if n%2 == 1 {
			logical.WriteString(line[:len(line)-1])
			continue
		}
		logical.WriteString(line)
		s := logical.String()
		logical.Reset()
		k, v, err := splitProperty(s)
		if err != nil {
			return nil, err
		}
		props[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if logical.Len() > 0 {
		k, v, err := splitProperty(logical.String())
		if err != nil {
			return nil, err
		}
		props[k] = v
	}
	return props, nil
}

func splitProperty(s string) (string, string, error) {
	end := len(s)
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if s[i] == '=' || s[i] == ':' || s[i] == ' ' || s[i] == '\t' || s[i] == '\f' {
			end = i
			break
		}
	}
	key, rest := s[:end], s[end:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	k, err := unescapeProperty(key)
	if err != nil {
		return "", "", err
	}
	v, err := unescapeProperty(rest)
	return k, v, err
}

func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\u escape in %q", s)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\u escape in %q", s)
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// setting is one walrelay flag and its value.
type setting struct{ flag, value string }

// imported is what importDebezium made of a connector configuration.
type imported struct {
	settings    []setting
	notes       []string
	unsupported []string
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

// importDebezium maps the options of a Debezium PostgreSQL connector with
// the Outbox Event Router to walrelay's settings.
func importDebezium(props map[string]string) imported {
	var imp imported
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
		imp.unsupported = append(imp.unsupported, fmt.Sprintf("%s=%s: %s", k, v, why))
	}
	set := func(f, v string) { imp.settings = append(imp.settings, setting{f, v}) }

	if c := get("connector.class", ""); c != postgresConnector && c != "PostgresConnector" {
		bad("connector.class", "walrelay replaces "+postgresConnector)
	}
	if p := get("plugin.name", "decoderbufs"); p != "pgoutput" {
		if _, ok := props["plugin.name"]; !ok {
			imp.unsupported = append(imp.unsupported, "plugin.name is not set: Debezium then uses decoderbufs; walrelay reads pgoutput only (a slot made with pgoutput)")
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
		imp.notes = append(imp.notes, "the connection is not sslmode=verify-full and walrelay run refuses that for a host other than loopback (--pg-require-verified-tls): set database.sslmode=verify-full and database.sslrootcert, or add WALRELAY_PG_REQUIRE_VERIFIED_TLS=false to accept an unverified connection")
	}
	if _, ok := props["database.password"]; ok {
		used["database.password"] = true
		imp.notes = append(imp.notes, "database.password is not printed: write the URL with the password to a file readable only by walrelay and set WALRELAY_PG_URL_FILE to it instead of WALRELAY_PG_URL, or give it in PGPASSWORD")
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
		imp.unsupported = append(imp.unsupported, "table.include.list is not set: name the outbox table(s) (schema.table) so that walrelay relays those only")
	} else {
		var names []string
		for _, t := range splitList(tables) {
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
func importRouter(props map[string]string, imp *imported, get func(k, def string) string, bad func(k, why string), set func(f, v string)) {
	aliases := splitList(get("transforms", ""))
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
		imp.unsupported = append(imp.unsupported, "transforms: no "+eventRouter+": walrelay relays outbox events only")
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
	for _, f := range splitList(get(p+"table.fields.additional.placement", "")) {
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
	for k := range props {
		if strings.HasPrefix(k, p+"tracing.") {
			bad(k, "walrelay adds no tracing headers")
		}
	}

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

// shellQuote quotes s for a POSIX shell when it holds more than
// [A-Za-z0-9._/:@%+=,-].
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._/:@%+=,-", c) >= 0) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
