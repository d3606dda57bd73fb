package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/replication"
)

// checkCmd runs every preflight check against PostgreSQL and Kafka without
// streaming or creating anything, and prints one line per check.
func checkCmd(args []string, stdout, stderr io.Writer) int {
	c, code := parseCommand("check", args, stderr, nil, nil)
	if code >= 0 {
		return code
	}
	cfg, rc, dc, sc := c.cfg, c.rc, c.dc, c.sc
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	checks := replication.Preflight(ctx, rc, zap.NewNop())
	if checks[0].Err == nil {
		err := checkColumns(ctx, rc.ConnString, dc)
		checks = append(checks, replication.Check{Name: "outbox columns", Err: err, Note: "every mapped and template column exists"})
	}
	checks = append(checks, checkKafka(ctx, cfg, sc.Opts)...)
	failed := 0
	for _, c := range checks {
		if c.Err != nil {
			failed++
			fmt.Fprintf(stdout, "FAIL  %s: %v\n", c.Name, c.Err)
			continue
		}
		if c.Note != "" {
			fmt.Fprintf(stdout, "PASS  %s: %s\n", c.Name, c.Note)
		} else {
			fmt.Fprintf(stdout, "PASS  %s\n", c.Name)
		}
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "%d of %d checks failed\n", failed, len(checks))
		return exitConfig
	}
	fmt.Fprintf(stdout, "all %d checks passed\n", len(checks))
	return exitOK
}

// checkKafka checks that a broker answers and that the dead-letter topic
// exists or may be created.
func checkKafka(ctx context.Context, cfg config, opts []kgo.Opt) []replication.Check {
	brokers := splitList(cfg.brokers)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return []replication.Check{{Name: "reach Kafka", Err: err}}
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return []replication.Check{{Name: "reach Kafka", Err: fmt.Errorf("reach kafka at %s: %w: check --brokers and that the brokers' advertised listeners are reachable from here", cfg.brokers, err)}}
	}
	checks := []replication.Check{{Name: "reach Kafka", Note: fmt.Sprintf("%d broker(s), cluster %s", len(meta.Brokers), meta.Cluster)}}
	if cfg.onPoison != "dead-letter" {
		return checks
	}
	topics, err := adm.ListTopics(ctx, cfg.dlqTopic)
	c := replication.Check{Name: "dead-letter topic " + cfg.dlqTopic}
	switch d, ok := topics[cfg.dlqTopic]; {
	case err != nil:
		c.Err = fmt.Errorf("list topics: %w", err)
	case ok && d.Err == nil:
		c.Note = fmt.Sprintf("exists, %d partitions", len(d.Partitions))
	case ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		c.Err = d.Err
	case cfg.createTopics:
		c.Note = "missing: will be created at start (--create-topics)"
	default:
		c.Err = fmt.Errorf("topic %s does not exist and --create-topics is off: create it", cfg.dlqTopic)
	}
	return append(checks, c)
}

// healthCmd probes a running walrelay's HTTP endpoint; for container
// health checks in images without a shell.
func healthCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:8080/readyz", "endpoint to probe")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitConfig
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(*url)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay health: %v\n", err)
		return exitRuntime
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Fprintf(stdout, "%s %s", resp.Status, strings.TrimSpace(string(body))+"\n")
	if resp.StatusCode != http.StatusOK {
		return exitRuntime
	}
	return exitOK
}
