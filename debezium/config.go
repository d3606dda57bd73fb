package debezium

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/walrelay/walrelay/internal/javaprops"
)

// ParseConnectorConfig reads a connector configuration: JSON (Connect's
// {"name":...,"config":{...}} or a flat object) or Java properties. It
// returns the options and the connector's name, if given.
func ParseConnectorConfig(path string, b []byte) (map[string]string, string, error) {
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
	k, err := javaprops.Unescape(key)
	if err != nil {
		return "", "", err
	}
	v, err := javaprops.Unescape(rest)
	return k, v, err
}
