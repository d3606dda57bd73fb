package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestEnvironmentFillsFlagsNotGiven(t *testing.T) {
	t.Setenv("WALRELAY_SLOT", "from_env")
	t.Setenv("WALRELAY_STATUS_INTERVAL", "3s")
	t.Setenv("WALRELAY_PUBLICATION", "ignored_env")
	var cfg config
	fs := newFlagSet("run", &cfg)
	if err := kit.Parse(fs, []string{"--publication", "from_flag"}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if cfg.Replication.Slot != "from_env" || cfg.Replication.StatusInterval != 3*time.Second {
		t.Errorf("slot %q, status interval %s: the environment was not used", cfg.Replication.Slot, cfg.Replication.StatusInterval)
	}
	if cfg.Replication.Publication != "from_flag" {
		t.Errorf("publication %q: a flag on the command line must win over the environment", cfg.Replication.Publication)
	}
}

func TestEveryMistakeIsReportedAtOnce(t *testing.T) {
	var cfg config
	fs := newFlagSet("run", &cfg)
	args := []string{"--pg-url", "postgres://localhost/db", "--slot", "Bad-Slot", "--kafka-compression", "brotli",
		"--on-poison", "maybe", "--topic", "x.${", "--header-columns", "type", "--log-format", "xml"}
	if err := kit.Parse(fs, args, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	_, err := cfg.stages()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`slot "Bad-Slot"`, `compression "brotli"`, `on-poison "maybe"`, "unclosed ${", "column:header pairs", `--log-format "xml"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"version"}, exitOK, "walrelay"},
		{[]string{"frobnicate"}, exitConfig, `unknown command "frobnicate"`},
		{[]string{"run", "--nope"}, exitConfig, "unknown flag --nope"},
		{[]string{"run", "--slot", "x"}, exitConfig, "set --pg-url or WALRELAY_PG_URL"},
		{[]string{"run", "--kafka-sasl-mechanism", "SCRAM-SHA-256", "--pg-url", "postgres://h/db"}, exitConfig, "needs --kafka-sasl-username and a password"},
		{[]string{"run", "--kafka-tls-cert-file", "/nonexistent", "--pg-url", "postgres://h/db"}, exitConfig, "go together"},
		{[]string{"run", "--topic-allow", "outbox.(", "--pg-url", "postgres://h/db"}, exitConfig, `topic allow pattern "outbox.("`},
		{[]string{"run", "--max-created-topics", "-1", "--pg-url", "postgres://h/db"}, exitConfig, "max created topics -1"},
		{[]string{"run", "--http-idle-timeout", "0s", "--pg-url", "postgres://h/db"}, exitConfig, "--http-idle-timeout 0s"},
		{[]string{"run", "--http-max-connections", "0", "--pg-url", "postgres://h/db"}, exitConfig, "--http-max-connections 0"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := realMain(c.args, &out, &errOut)
			if code != c.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, c.code, errOut.String())
			}
			if all := out.String() + errOut.String(); !strings.Contains(all, c.want) {
				t.Errorf("output lacks %q:\n%s", c.want, all)
			}
		})
	}
}
