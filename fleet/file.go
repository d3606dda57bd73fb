package fleet

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// entry is one setting of the file: a flag's name, its value as the flag
// reads it, and its line.
type entry struct {
	key, value string
	line       int
}

// section is a mapping of the file: a pipeline, the defaults or the top.
type section struct {
	name    string // the pipeline's name; "" for the top and the defaults
	line    int
	entries []entry
}

// lookup is the entry of key, if the section has one.
func (s section) lookup(key string) (entry, bool) {
	for _, e := range s.entries {
		if e.key == key {
			return e, true
		}
	}
	return entry{}, false
}

// file is the pipeline file as written: sections of settings, not yet
// checked against the flags.
type file struct {
	top, defaults section
	pipelines     []section
}

// mistake is one mistake of the file, where it is.
type mistake struct {
	line     int    // 0: not on one line (the command line, the file as a whole)
	pipeline string // "": not a pipeline's
	msg      string
}

// Keys of the file that are not flags.
const (
	keyDefaults  = "defaults"
	keyPipelines = "pipelines"
	keyName      = "name"
)

// parseFile reads the file's shape: a mapping with defaults: (a mapping),
// pipelines: (a list of mappings, each with a name: of its own) and the
// process-wide settings. Values are scalars, or lists of scalars that a
// comma-separated flag reads joined with commas.
func parseFile(data []byte) (file, []mistake) {
	var f file
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// N.B. yaml's message names the line ("yaml: line 3: ...").
		return f, []mistake{{msg: strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	if len(doc.Content) == 0 {
		return f, []mistake{{msg: "the file is empty: want process-wide settings, defaults: and pipelines: (docs/fleet.md)"}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return f, []mistake{{line: root.Line, msg: "want a mapping of settings, defaults: and pipelines: (docs/fleet.md)"}}
	}
	var ms []mistake
	f.top.line = root.Line
	listed := false // pipelines: is there, as a list
	for k, v := range pairs(root, "", &ms) {
		switch k.Value {
		case keyDefaults:
			if v.Kind != yaml.MappingNode {
				ms = append(ms, mistake{line: v.Line, msg: "defaults: want a mapping of settings, e.g. slot: walrelay"})
				continue
			}
			f.defaults = section{line: k.Line, entries: entries(v, "", &ms)}
			for _, e := range f.defaults.entries {
				if e.key == keyName {
					ms = append(ms, mistake{line: e.line, msg: "defaults: name: each pipeline names itself; remove it from defaults:"})
				}
			}
		case keyPipelines:
			if v.Kind != yaml.SequenceNode {
				ms = append(ms, mistake{line: v.Line, msg: "pipelines: want a list, each item a mapping with its name: and settings"})
				continue
			}
			listed = true
			f.pipelines = pipelines(v, &ms)
		default:
			if e, ok := value(k, v, "", &ms); ok {
				f.top.entries = append(f.top.entries, e)
			}
		}
	}
	if listed && len(f.pipelines) == 0 || !listed && !slices.ContainsFunc(ms, func(m mistake) bool { return strings.HasPrefix(m.msg, keyPipelines+":") }) {
		ms = append(ms, mistake{line: root.Line, msg: "no pipelines: list at least one under pipelines:, each with its name: (docs/fleet.md)"})
	}
	return f, ms
}

// pipelines reads the list of pipelines, each a mapping with a unique
// name.
func pipelines(list *yaml.Node, ms *[]mistake) []section {
	var out []section
	first := map[string]int{} // name → line
	for i, item := range list.Content {
		if item.Kind != yaml.MappingNode {
			*ms = append(*ms, mistake{line: item.Line, msg: fmt.Sprintf("pipelines: item %d: want a mapping with its name: and settings", i+1)})
			continue
		}
		name := ""
		for k, v := range pairs(item, "", nil) {
			if k.Value == keyName && v.Kind == yaml.ScalarNode {
				name = strings.TrimSpace(v.Value)
			}
		}
		s := section{name: name, line: item.Line}
		s.entries = entries(item, name, ms)
		switch at, dup := first[name]; {
		case name == "":
			*ms = append(*ms, mistake{line: item.Line, msg: fmt.Sprintf("pipelines: item %d has no name: give each pipeline a name: of its own", i+1)})
		case strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }):
			*ms = append(*ms, mistake{line: item.Line, pipeline: name, msg: "name: holds a control character: use printable characters"})
		case dup:
			*ms = append(*ms, mistake{line: item.Line, pipeline: name, msg: fmt.Sprintf("name: %q is also the name of the pipeline at line %d: give each pipeline a name of its own", name, at)})
		default:
			first[name] = item.Line
		}
		out = append(out, s)
	}
	return out
}

// entries reads a mapping of settings; a key given twice is a mistake.
func entries(m *yaml.Node, pipeline string, ms *[]mistake) []entry {
	var out []entry
	for k, v := range pairs(m, pipeline, ms) {
		if e, ok := value(k, v, pipeline, ms); ok {
			out = append(out, e)
		}
	}
	return out
}

// pairs yields the key and value nodes of mapping m, reporting keys that
// are not plain strings or repeat (ms nil: silently skipped).
func pairs(m *yaml.Node, pipeline string, ms *[]mistake) func(yield func(k, v *yaml.Node) bool) {
	return func(yield func(k, v *yaml.Node) bool) {
		seen := map[string]int{}
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				if ms != nil {
					*ms = append(*ms, mistake{line: k.Line, pipeline: pipeline, msg: "want a setting's name as the key"})
				}
				continue
			}
			if at, dup := seen[k.Value]; dup {
				if ms != nil {
					*ms = append(*ms, mistake{line: k.Line, pipeline: pipeline, msg: fmt.Sprintf("%s: set twice (first at line %d): keep one", k.Value, at)})
				}
				continue
			}
			seen[k.Value] = k.Line
			if !yield(k, v) {
				return
			}
		}
	}
}

// errNotScalar is the mistake of a value that is a mapping, or a list of
// anything but scalars.
var errNotScalar = errors.New("want a value (a string, number or switch) or a list of them")

// value reads the entry of key k: a scalar, a null (the empty value) or a
// list of scalars joined with commas.
func value(k, v *yaml.Node, pipeline string, ms *[]mistake) (entry, bool) {
	e := entry{key: k.Value, line: k.Line}
	if k.Value == "<<" {
		*ms = append(*ms, mistake{line: k.Line, pipeline: pipeline, msg: "<<: merge keys are not read: put what pipelines share under defaults:"})
		return e, false
	}
	if v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias // N.B. an anchored value (&x) used again (*x)
	}
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag != "!!null" {
			e.value = v.Value
		}
		return e, true
	case yaml.SequenceNode:
		var items []string
		for _, it := range v.Content {
			if it.Kind != yaml.ScalarNode {
				*ms = append(*ms, mistake{line: it.Line, pipeline: pipeline, msg: k.Value + ": " + errNotScalar.Error()})
				return e, false
			}
			items = append(items, it.Value)
		}
		e.value = strings.Join(items, ",")
		return e, true
	}
	*ms = append(*ms, mistake{line: v.Line, pipeline: pipeline, msg: k.Value + ": " + errNotScalar.Error()})
	return e, false
}
