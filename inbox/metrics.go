package inbox

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector returns the Consumer's Prometheus metrics, to register on the
// application's registry (prometheus.MustRegister(c.Collector())). Every
// metric carries the label group:
//
//	walrelay_inbox_records_total{outcome}  records finished: applied, duplicate, dead_lettered
//	walrelay_inbox_retries_total           attempts that failed and were tried again
//	walrelay_inbox_commit_errors_total     offset commits that failed
//	walrelay_inbox_handler_seconds         one attempt's transaction (id insert, Handler, commit)
//	walrelay_inbox_partitions              partitions assigned to this member
//	walrelay_inbox_lag{topic,partition}    records of the partition not handled yet (its high watermark of the last fetch minus the next offset to handle)
//	walrelay_inbox_held_records{topic,partition}  records held behind a failed record of their key (OnFailure HoldKey)
func (c *Consumer) Collector() prometheus.Collector { return collector{c} }

type collector struct{ c *Consumer }

var (
	descRecords      = prometheus.NewDesc("walrelay_inbox_records_total", "Records finished by the inbox consumer, by outcome: applied (the Handler committed), duplicate (the id was processed already), dead_lettered.", []string{"group", "outcome"}, nil)
	descRetries      = prometheus.NewDesc("walrelay_inbox_retries_total", "Attempts that failed and were tried again (the Handler's errors and database outages).", []string{"group"}, nil)
	descCommitErrors = prometheus.NewDesc("walrelay_inbox_commit_errors_total", "Offset commits that failed (the records are delivered again and skipped as duplicates).", []string{"group"}, nil)
	descPartitions   = prometheus.NewDesc("walrelay_inbox_partitions", "Partitions assigned to this member.", []string{"group"}, nil)
	descHeld         = prometheus.NewDesc("walrelay_inbox_held_records", "Records of the partition held behind a failed record of their key (OnFailure HoldKey), the failed ones included.", []string{"group", "topic", "partition"}, nil)
	descLag          = prometheus.NewDesc("walrelay_inbox_lag", "Records of the partition not handled yet: its high watermark in the last fetch minus the next offset to handle.", []string{"group", "topic", "partition"}, nil)
)

// newHandlerSeconds is the attempt latency histogram of group.
func newHandlerSeconds(group string) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:        "walrelay_inbox_handler_seconds",
		Help:        "Time of one attempt's transaction: the id insert, the Handler (or OnDuplicate) and the commit.",
		ConstLabels: prometheus.Labels{"group": group},
		Buckets:     []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	})
}

// Describe lists every descriptor, the lag's too (no series before the
// first partition is fetched).
func (m collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRecords, descRetries, descCommitErrors, descPartitions, descLag, descHeld} {
		ch <- d
	}
	m.c.handlerSeconds.Describe(ch)
}

func (m collector) Collect(ch chan<- prometheus.Metric) {
	c, g := m.c, m.c.cfg.Group
	s := c.Stats()
	for _, o := range []struct {
		outcome string
		n       int64
	}{{"applied", s.Applied}, {"duplicate", s.Duplicates}, {"dead_lettered", s.DeadLettered}} {
		ch <- prometheus.MustNewConstMetric(descRecords, prometheus.CounterValue, float64(o.n), g, o.outcome)
	}
	ch <- prometheus.MustNewConstMetric(descRetries, prometheus.CounterValue, float64(s.Retries), g)
	ch <- prometheus.MustNewConstMetric(descCommitErrors, prometheus.CounterValue, float64(s.CommitErrors), g)
	c.handlerSeconds.Collect(ch)
	c.mu.Lock()
	defer c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descPartitions, prometheus.GaugeValue, float64(len(c.parts)), g)
	for k, w := range c.parts {
		ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(w.held.Load()), g, k.topic, strconv.Itoa(int(k.p)))
		if lag, ok := w.lag(); ok {
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(lag), g, k.topic, strconv.Itoa(int(k.p)))
		}
	}
}

// observe records one attempt's duration.
func (c *Consumer) observe(start time.Time) { c.handlerSeconds.Observe(time.Since(start).Seconds()) }
