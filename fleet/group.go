package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/kafkaconn"
)

// keyGroup is the file's group: setting (not a flag): the name of the
// Kafka consumer group whose replicas share the pipelines.
const keyGroup = "group"

// groupPattern is what a group's name may hold: it names a Kafka topic.
var groupPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}$`)

// coordinationTopic is the topic, and consumer group, of group.
func coordinationTopic(group string) string { return "walrelay-fleet-" + group }

// fileKey keys the coordination topic's record of the file's fingerprint.
const fileKey = "file"

// errOtherFile is a replica whose file differs from the group's.
var errOtherFile = errors.New("another pipeline file")

// groupOf is the file's group: setting, "" when it has none.
func groupOf(data []byte) string {
	f, _ := parseFile(data)
	e, _ := f.top.lookup(keyGroup)
	return e.value
}

// fingerprint is the sha256 of the file's pipelines, as they run: each
// pipeline's name and settings (the defaults', then its own), sorted by
// name and key; comments, order and the process-wide settings (which may
// differ per replica) do not count.
func fingerprint(data []byte) string {
	f, _ := parseFile(data)
	ps := slices.Clone(f.pipelines)
	slices.SortFunc(ps, func(a, b section) int { return strings.Compare(a.name, b.name) })
	h := sha256.New()
	for _, p := range ps {
		set := map[string]string{}
		for _, e := range f.defaults.entries {
			set[e.key] = e.value
		}
		for _, e := range p.entries {
			set[e.key] = e.value
		}
		keys := make([]string, 0, len(set))
		for k := range set {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		fmt.Fprintf(h, "pipeline %q\n", p.name)
		for _, k := range keys {
			fmt.Fprintf(h, "  %q=%q\n", k, set[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// prepareTopic creates group's coordination topic, one partition per
// pipeline, or checks the one there: its partition count must be the
// file's pipeline count, and the fingerprint the first replica recorded
// on its partition 0 (written now, if none did yet) this file's. A
// mismatch is errOtherFile, with the fix.
func prepareTopic(ctx context.Context, opts []kgo.Opt, log *zap.Logger, group string, pipelines int, sum string) error {
	topic := coordinationTopic(group)
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return fmt.Errorf("create coordination client: %w", err)
	}
	defer cl.Close()
	if _, err := kafkaconn.CreateTopics(ctx, cl, log, 30*time.Second, kafkaconn.Topic{Name: topic, Partitions: int32(pipelines), ReplicationFactor: -1}); err != nil {
		return fmt.Errorf("create coordination topic: %w", err)
	}
	fix := fmt.Sprintf("every replica of group %q must run the same pipeline file; to change the pipelines, stop every replica, delete the topic (kafka-topics.sh --delete --topic %s) and start them all with the new file", group, topic)
	adm := kadm.NewClient(cl)
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("describe coordination topic: %w", err)
	}
	if n := len(tds[topic].Partitions); n != pipelines {
		return fmt.Errorf("%w: coordination topic %s has %d partitions, one per pipeline of the group's file, and this file has %d pipelines: %s", errOtherFile, topic, n, pipelines, fix)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("read coordination topic's end offsets: %w", err)
	}
	if o, ok := ends.Lookup(topic, 0); !ok || o.Err != nil || o.Offset == 0 {
		rec := &kgo.Record{Topic: topic, Partition: 0, Key: []byte(fileKey), Value: []byte(sum)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			return fmt.Errorf("record the file's fingerprint: %w", err)
		}
	}
	// N.B. the first record is the group's file: two first replicas that
	// raced both wrote, and the later one reads the earlier's.
	first, err := firstRecord(ctx, opts, topic)
	if err != nil {
		return err
	}
	if string(first) != sum {
		return fmt.Errorf("%w: this file's pipelines (sha256 %s) differ from those of the file group %q's first replica recorded on %s (sha256 %s): %s", errOtherFile, sum, group, topic, first, fix)
	}
	return nil
}

// firstRecord reads the value of the first record on partition 0 of topic.
func firstRecord(ctx context.Context, opts []kgo.Opt, topic string) ([]byte, error) {
	cl, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		return nil, fmt.Errorf("create coordination reader: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read coordination topic %s: %w", topic, err)
		}
		for _, r := range fs.Records() {
			if string(r.Key) == fileKey {
				return r.Value, nil
			}
		}
	}
}

// groupOpts are the Kafka settings every pipeline shares (process-wide):
// the coordination's clients use them.
func groupOpts(plans []plan) []kgo.Opt {
	sc := plans[0].cfg.Sink
	return append(sc.Kafka.Opts(), kgo.SeedBrokers(sc.Brokers...))
}

// joinGroup prepares group's coordination topic for this file and returns
// the group's runner; nil and the exit code when the file is refused
// (2: another file's group) or a signal came while it waited for Kafka (0).
func (f *fleet) joinGroup(c Command, data []byte, plans []plan, group string) (*groupRun, int) {
	given := ""
	if fl := c.Flags.Lookup(instanceFlag); fl != nil {
		given = fl.Value.String()
	}
	if strings.ContainsFunc(given, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		fmt.Fprintf(c.Stderr, "walrelay: --fleet-instance %q: want a name without spaces, e.g. the pod's name\n", given)
		return nil, exitConfig
	}
	// N.B. as a single walrelay waits for Kafka at its start, until a
	// signal: a broker down, restarting or fenced (INVALID_REPLICATION_FACTOR:
	// "All brokers are currently fenced") refuses the topic for a while;
	// each attempt is bounded by a minute.
	sctx, stop := context.WithCancel(context.Background())
	defer stop()
	signalled := make(chan struct{})
	go func() {
		select {
		case <-c.Signals:
			close(signalled)
			stop()
		case <-sctx.Done():
		}
	}()
	var err error
	for {
		ctx, cancel := context.WithTimeout(sctx, time.Minute)
		err = prepareTopic(ctx, groupOpts(plans), f.log, group, len(plans), fingerprint(data))
		cancel()
		if err == nil || errors.Is(err, errOtherFile) {
			break
		}
		select {
		case <-signalled:
			f.log.Info("stopped before joining the group", zap.NamedError("last_error", err))
			return nil, 0
		default:
		}
		f.log.Warn("cannot prepare the group's coordination topic yet: retrying until Kafka answers", zap.Error(err))
		select {
		case <-signalled:
		case <-time.After(time.Second):
		}
	}
	if errors.Is(err, errOtherFile) {
		fmt.Fprintf(c.Stderr, "walrelay: %s: %v\n", c.File, err)
		f.log.Error("refused: another pipeline file than the group's", zap.Error(err))
		return nil, exitConfig
	}
	parsed, _ := parseFile(data)
	session, _ := groupSession(parsed) // N.B. checked by load
	g := &groupRun{name: group, instance: instanceName(given), session: session, log: f.log, shutdown: f.shutdown, version: c.Version,
		plans: map[*member]plan{}, running: map[*member]*runningPipeline{}}
	g.parts = slices.Clone(f.members)
	for i, m := range f.members {
		g.plans[m] = plans[i]
	}
	slices.SortFunc(g.parts, func(a, b *member) int { return strings.Compare(a.name, b.name) })
	f.group = g
	return g, exitOK
}

// instanceFlag names this replica in its group (process-wide).
const instanceFlag = "fleet-instance"
