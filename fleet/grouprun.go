package fleet

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/pipeline"
)

// groupRun runs the pipelines the fleet's consumer group assigns to this
// replica: partition i of the coordination topic is the i-th pipeline
// sorted by name. On revocation it stops them gracefully (drained,
// confirmed, the slot released) before the rebalance goes on; on loss
// too; on assignment it starts them, each waiting for its slot
// while another walsender still holds it.
type groupRun struct {
	name     string        // the group's
	instance string        // this replica's
	session  time.Duration // the group session's timeout (groupSession)
	log      *zap.Logger
	shutdown time.Duration
	version  string
	parts    []*member // by partition
	plans    map[*member]plan
	joined   atomic.Bool // the first assignment arrived
	stopping atomic.Bool // a signal: assign nothing more

	mu      sync.Mutex
	running map[*member]*runningPipeline
}

// runningPipeline is an assigned pipeline's run.
type runningPipeline struct {
	relay  *pipeline.Relay
	cancel context.CancelFunc
	done   chan struct{}
}

// stateElsewhere is /pipelines' state of a pipeline another replica of
// the group runs.
const stateElsewhere = "elsewhere"

// here says whether m runs in this process: always outside a group.
func (m *member) here() bool { return !m.grouped || m.owner.Load() != nil }

// assigned starts the pipelines of the newly assigned partitions.
func (g *groupRun) assigned(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	defer g.joined.Store(true)
	if g.stopping.Load() {
		return
	}
	for _, p := range parts[coordinationTopic(g.name)] {
		if int(p) < len(g.parts) {
			g.start(g.parts[p])
		}
	}
}

// revoked stops the revoked partitions' pipelines gracefully and waits.
func (g *groupRun) revoked(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	g.stop(parts[coordinationTopic(g.name)])
}

// lost stops the lost partitions' pipelines gracefully too, as revoked:
// franz-go calls a partition lost on any error of the group session (the
// member kicked after its session timeout, a heartbeat or join that
// failed, the coordinator gone), and another replica may already be
// assigned it; that one waits for the slot meanwhile (the slot lets only
// one stream), and resumes where this one confirmed last. N.B. aborted,
// every record Kafka had acknowledged since the last status update was
// sent again by the next owner (TestFleetGroupLostSessionResendsNothing).
func (g *groupRun) lost(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	if ps := parts[coordinationTopic(g.name)]; len(ps) > 0 {
		g.log.Warn("group session lost: stopping its pipelines gracefully; another replica may already be assigned them", zap.String("group", g.name))
		g.stop(ps)
	}
}

// start runs m: its first assignment with the relay made at the start
// (checked with the file), each later one with a new relay and metrics.
func (g *groupRun) start(m *member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.running[m]; ok {
		return
	}
	relay, _ := m.live()
	if m.used {
		p := g.plans[m]
		mets := newMemberMetrics(m, g.version)
		p.cfg.Metrics = mets
		r, err := pipeline.New(p.cfg, m.log)
		if err != nil {
			// N.B. the same configuration was accepted at the start.
			msg := err.Error()
			m.stopped.Store(&msg)
			m.owner.Store(&g.instance)
			return
		}
		m.mu.Lock()
		m.relay, m.metrics = r, mets
		m.mu.Unlock()
		relay = r
	}
	m.used = true
	m.stopped.Store(nil)
	m.owner.Store(&g.instance)
	ctx, cancel := context.WithCancel(context.Background())
	rp := &runningPipeline{relay: relay, cancel: cancel, done: make(chan struct{})}
	g.running[m] = rp
	m.log.Info("pipeline assigned here", zap.String("group", g.name), zap.String("instance", g.instance))
	go func() {
		defer close(rp.done)
		err := relay.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		msg := "stopped"
		if err != nil {
			msg = err.Error()
		}
		m.stopped.Store(&msg)
		m.log.Error("pipeline stopped: it stays assigned here until walrelay is restarted with the fix; the other pipelines go on", zap.Error(err), zap.Int("exit_code", exitCode(err)))
	}()
}

// stop stops the pipelines of parts at once, each gracefully (drained,
// confirmed), and waits until each has released its slot; past the
// longest shutdown timeout and 5 s it aborts them. Callbacks are serial: no
// assignment starts one of them again meanwhile.
func (g *groupRun) stop(parts []int32) {
	g.mu.Lock()
	var stopping []*runningPipeline
	var stopped []*member
	var names []string
	for _, p := range parts {
		if int(p) >= len(g.parts) {
			continue
		}
		m := g.parts[p]
		if rp, ok := g.running[m]; ok {
			stopping = append(stopping, rp)
			stopped = append(stopped, m)
			names = append(names, m.name)
			rp.cancel()
		}
		m.owner.Store(nil)
	}
	g.mu.Unlock()
	if len(stopping) == 0 {
		return
	}
	began := time.Now()
	aborted := false
	timeout := time.After(g.shutdown + 5*time.Second)
	for _, rp := range stopping {
		select {
		case <-rp.done:
		case <-timeout:
			aborted = true
			g.log.Warn("shutdown timeout passed: aborting the revoked pipelines", zap.Strings("pipelines", names))
			for _, rp := range stopping {
				rp.relay.Abort()
			}
			<-rp.done
		}
	}
	// N.B. removed once stopped, so that a second signal (abortAll)
	// reaches them while they drain.
	g.mu.Lock()
	for _, m := range stopped {
		delete(g.running, m)
	}
	g.mu.Unlock()
	g.log.Info("pipelines released", zap.String("group", g.name), zap.Strings("pipelines", names), zap.Bool("aborted", aborted), zap.Duration("took", time.Since(began)))
}

// abortAll aborts every running pipeline (a second signal).
func (g *groupRun) abortAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, rp := range g.running {
		rp.relay.Abort()
	}
}

// newMemberMetrics is a pipeline's registry, with walrelay_pipeline_stopped.
func newMemberMetrics(m *member, version string) *metrics.Metrics {
	mets := metrics.New()
	mets.SetBuildInfo(version, runtime.Version())
	mets.ReadStopped(func() float64 {
		if m.stopped.Load() != nil {
			return 1
		}
		return 0
	})
	if m.inflight != nil {
		readInflightWait(mets, m.inflight) // budget.go
	}
	return mets
}

// instanceName is --fleet-instance, else the host's name.
func instanceName(given string) string {
	if given != "" {
		return given
	}
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return fmt.Sprintf("pid-%d", os.Getpid())
}

// runGroup joins the group and runs what it assigns here until a signal:
// the first leaves the group, which revokes every pipeline here (each
// stopped gracefully, so that the others take them over from their
// confirmed positions); a second aborts them. It returns 0.
func (g *groupRun) run(opts []kgo.Opt, sigs <-chan os.Signal, sample func()) int {
	topic := coordinationTopic(g.name)
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumerGroup(topic), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(g.session), kgo.HeartbeatInterval(heartbeatOf(g.session)),
		kgo.RebalanceTimeout(g.shutdown+30*time.Second),
		kgo.OnPartitionsAssigned(g.assigned), kgo.OnPartitionsRevoked(g.revoked), kgo.OnPartitionsLost(g.lost),
	)...)
	if err != nil {
		g.log.Error("cannot create the group's client", zap.Error(err))
		return exitConfig
	}
	g.log.Info("joining group", zap.String("group", g.name), zap.String("topic", topic), zap.String("instance", g.instance), zap.Duration("session_timeout", g.session))
	closed := make(chan struct{})
	go func() {
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachError(func(t string, p int32, err error) {
				g.log.Warn("group consumer", zap.String("topic", t), zap.Int32("partition", p), zap.Error(err))
			})
		}
	}()
	samples := time.NewTicker(rateEvery)
	defer samples.Stop()
	sample()
	for {
		select {
		case sig := <-sigs:
			if g.stopping.Load() {
				g.log.Warn("second signal: aborting")
				g.abortAll()
				continue
			}
			g.log.Info("stopping: leaving the group, each pipeline here stops gracefully", zap.String("signal", sig.String()))
			g.stopping.Store(true)
			go func() {
				// N.B. Close revokes every partition (revoked, above)
				// before it leaves the group.
				cl.Close()
				close(closed)
			}()
		case <-closed:
			g.log.Info("left the group")
			return exitOK
		case <-samples.C:
			sample()
		}
	}
}
