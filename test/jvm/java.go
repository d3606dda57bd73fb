package jvm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/walrelay/walrelay/test/proc"
)

// Find returns the java launcher; what names the program that needs it in
// the error ("Kafka 4.4.0").
func Find(what string) (string, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("java not found in PATH (%s needs Java 17 or newer): apt-get install -y openjdk-17-jre-headless", what)
	}
	return java, nil
}

// Command is one java command line over a directory of jars.
type Command struct {
	// Options are the JVM's options: heap, garbage collector, JIT.
	Options []string
	// Props are system properties, name=value (-D).
	Props []string
	// Libs is the directory whose jars are the class path.
	Libs string
	// Main is the main class; Args its arguments (a properties file).
	Main string
	Args []string
}

// Argv returns java's arguments (without argv[0]).
func (c Command) Argv() []string {
	argv := append([]string(nil), c.Options...)
	for _, p := range c.Props {
		argv = append(argv, "-D"+p)
	}
	// N.B. the java launcher expands DIR/* to the jars in DIR.
	argv = append(argv, "-cp", filepath.Join(c.Libs, "*"), c.Main)
	return append(argv, c.Args...)
}

// Heap returns -Xms and -Xmx options for heaps of minMB and maxMB MiB.
func Heap(minMB, maxMB int) []string {
	return []string{fmt.Sprintf("-Xms%dm", minMB), fmt.Sprintf("-Xmx%dm", maxMB)}
}

// Log4j2 writes conf as dir/log4j2.properties and returns the system
// properties that make a JVM use it and write its logs into logsDir:
// log4j2.configurationFile and logsDirProp (the name the configuration
// reads, such as kafka.logs.dir).
func Log4j2(dir string, conf []byte, logsDirProp, logsDir string) (props []string, err error) {
	path := filepath.Join(dir, "log4j2.properties")
	if err := os.WriteFile(path, conf, 0o644); err != nil {
		return nil, err
	}
	return []string{logsDirProp + "=" + logsDir, "log4j2.configurationFile=" + path}, nil
}

// WriteProperties writes a Java properties file in key order.
func WriteProperties(path string, props map[string]string) error {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := strings.ReplaceAll(props[k], `\`, `\\`)
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// Start starts java (from Find) with c's command line, as o says otherwise
// (o.Path and o.Args are set from java and c).
func (c Command) Start(java string, o proc.Options) (*proc.Proc, error) {
	o.Path, o.Args = java, c.Argv()
	return proc.Start(o)
}
