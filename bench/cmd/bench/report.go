package main

import (
	"fmt"
	"strings"
)

func f0(x float64) string {
	if x == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", x)
}

func f1(x float64) string {
	if x == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", x)
}

// rss is a median RSS with its anonymous part in brackets.
func rss(all, anon float64) string {
	if anon == 0 {
		return f1(all)
	}
	return fmt.Sprintf("%.1f (%.1f)", all, anon)
}

func f2(x float64) string {
	if x == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", x)
}

// markdown renders the results as the tables of README's Performance section.
func markdown(res *Results) string {
	var b strings.Builder
	m := res.Machine
	fmt.Fprintf(&b, "\n## walrelay benchmark, %s\n\n", res.Started)
	fmt.Fprintf(&b, "Machine: %s, nproc %d, %d MiB, Linux %s, TCP congestion control %s; load average %s at start, %s at end; all cores %.0f%% busy over the run.  \n",
		m.CPUModel, m.NProc, m.MemTotalMB, m.Kernel, m.TCPCongestion, m.LoadAtStart, m.LoadAtEnd, 100*m.BusyShareRun)
	fmt.Fprintf(&b, "PostgreSQL %s, Kafka %s (broker), Kafka Connect %s + Debezium %s, %s, %s; walrelay %s.\n\n",
		m.PGVersion, m.KafkaVersion, m.ConnectVer, m.DebeziumVer, m.JavaVersion, m.GoVersion, m.WalrelayRev)

	if len(res.Fills) > 0 {
		b.WriteString("### W1 backlog drain\n\n")
		for _, f := range res.Fills {
			fmt.Fprintf(&b, "- %s: %d rows in %d transactions, committed in %.1f s (%.0f rows/s), %d MiB of WAL; payload ~%.0f bytes, %d aggregates.\n",
				f.Workload, f.Rows, f.Transactions, f.Seconds, f.RowsPerS, f.WALBytes>>20, res.Config.PayloadBytes, res.Config.Aggregates)
		}
		b.WriteString("\n| workload | relay | events | s to slot confirmed | events/s | s to all records in Kafka (events/s) | peak RSS MiB | median RSS MiB after 1 s (anonymous) | CPU s | CPU s / M events | walsender CPU s | broker CPU s | other processes CPU s | load before → after |\n")
		b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, d := range res.Drains {
			relay := d.Relay
			if d.Error != "" {
				relay += " (error)"
			}
			recs := "–"
			if d.RecordsS > 0 {
				recs = fmt.Sprintf("%.2f (%.0f)", d.RecordsS, d.RecordsPerS)
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %s → %s |\n",
				d.Workload, relay, d.Events, f2(d.ConfirmedS), f0(d.EventsPerS), recs, f1(d.PeakRSSMB), rss(d.SteadyRSSMB, d.SteadyAnonMB),
				f1(d.CPUS), f1(d.CPUSPerMEvents), f1(d.WalsenderCPUS), f1(d.BrokerCPUS), d.OtherCPUS, d.LoadBefore, d.LoadAfter)
		}
		for _, d := range res.Drains {
			if d.WorkerStartS > 0 {
				fmt.Fprintf(&b, "\nDebezium's Connect worker (%s) took %.1f s and %.1f CPU s to start before the connector was created; not counted above.", d.Workload, d.WorkerStartS, d.WorkerStartCPU)
			}
		}
		b.WriteString("\n\nRSS is VmRSS; anonymous, RssAnon: the heap, stacks and the Go runtime's own. The rest is file pages, mostly the executable's, shared with the page cache.\n")
	}
	if len(res.Latency) > 0 {
		b.WriteString("\n### W2 steady rate: commit-to-consumer latency (ms)\n\n")
		b.WriteString("Insert → consume: consumer receive time minus the row's clock_timestamp() at insert (in the payload), the same measure for both relays. Record ts → consume: minus the Kafka record timestamp (walrelay: commit time; Debezium: when the connector processed the event; 1 ms resolution).\n\n")
		b.WriteString("Slot floor: the same rows at the same time through a second slot (test_decoding) read by pg_recvlogical, line read minus insert time; ratio = the relay's insert → consume over the floor.\n\n")
		b.WriteString("Kafka floor (kafka-floor): after walrelay, alone, no PostgreSQL: a franz-go producer set as walrelay's (acks all, idempotent, lz4) without a linger writes records of the payload's size at each rate, stamped when produced, and the same consumer reads them; produce → consume, what Kafka adds to any relay.\n\n")
		b.WriteString("Floors in series (chain-floor): after walrelay, no relay: the same writers at the same rates, the slot floor's pg_recvlogical, and each row produced to Kafka as soon as its line is read (the same producer, no linger), read back by the same consumer; insert → consume, the least any relay adds under this load, with one walsender less on the box than in walrelay's rows.\n\n")
		b.WriteString("| relay | target/s | achieved/s | events | p50 | p90 | p99 | p99.9 | max | slot floor p50 / p99 | ratio p50 / p99 | record ts → consume p50 / p99 | walrelay's commit → ack mean / p99 ≤ (of it, handed to Kafka → ack) | CPU s | CPU s / M events (relay · walsender · broker) | floor CPU s | bench CPU s | peak RSS MiB | median RSS MiB (anonymous) | machine busy | load after |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---|\n")
		for _, l := range res.Latency {
			relay := l.Relay
			if l.Error != "" {
				relay += " (error)"
			}
			s := l.InsertToConsume
			own := "–"
			if c := l.RelayCommitToAck; c != nil {
				own = fmt.Sprintf("%.1f / %.0f", c.MeanMS, c.P99LE)
				if k := l.RelayKafkaAck; k != nil {
					own += fmt.Sprintf(" (Kafka %.1f / %.0f)", k.MeanMS, k.P99LE)
				}
			}
			floor, ratio := "–", "–"
			if f := l.SlotFloor; f != nil {
				floor = fmt.Sprintf("%.2f / %.2f", f.P50, f.P99)
				ratio = fmt.Sprintf("%.2f× / %.2f×", l.FloorRatioP50, l.FloorRatioP99)
			}
			fmt.Fprintf(&b, "| %s | %d | %.0f | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %s | %.1f / %.1f | %s | %s | %s · %s · %s | %s | %s | %s | %s | %.0f%% | %s |\n",
				relay, l.TargetRate, l.AchievedRate, l.Received, s.P50, s.P90, s.P99, s.P999, s.Max, floor, ratio,
				l.RecordTSToConsume.P50, l.RecordTSToConsume.P99, own, f1(l.CPUS), f1(l.CPUSPerMEvents), f1(l.WalsenderCPUSPerMEvents), f1(l.BrokerCPUSPerMEvents),
				f1(l.FloorCPUS), f1(l.BenchCPUS), f1(l.PeakRSSMB), rss(l.SteadyRSSMB, l.SteadyAnonMB), 100*l.BusyShare, l.Load)
		}
	}
	if len(res.NewTopics) > 0 {
		b.WriteString("\n### New topics: 100 events of one aggregate type in one transaction, commit → all in Kafka (s)\n\n")
		b.WriteString("walrelay running and warm (one record on a pre-created topic first); \"in Kafka\": the topic's end offsets, asked of each leader every 2 ms, sum to the events.\n\n")
		b.WriteString("| relay | kind | topic | s | load after |\n|---|---|---|---:|---|\n")
		for _, n := range res.NewTopics {
			kind := n.Kind
			if n.Error != "" {
				kind += " (error: " + n.Error + ")"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %.3f | %s |\n", n.Relay, kind, n.Topic, n.Seconds, n.Load)
		}
	}
	b.WriteString(crashTable(res))
	b.WriteString(startupTable(res))
	b.WriteString(walMessagesTable(res))
	b.WriteString(inboxTable(res))
	b.WriteString(tracingTable(res))
	b.WriteString(fleetTable(res))
	b.WriteString(targets(res))
	if len(res.Errors) > 0 {
		b.WriteString("\n### Errors\n\n")
		for _, e := range res.Errors {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(e, "\n", " "))
		}
	}
	return b.String()
}

// memoryBoundSlackMiB is what the README's bound allows walrelay beyond
// --max-inflight-bytes: a 20 MiB soft memory limit above it and about
// 18 MiB of the executable's pages.
const memoryBoundSlackMiB = 40

// targets sets the figures next to issue 7's targets: information, not a verdict.
func targets(res *Results) string {
	var b strings.Builder
	b.WriteString("\n### Figures against issue 7's targets\n\n")
	get := func(wl, relay string) *Drain {
		for i := range res.Drains {
			if d := &res.Drains[i]; d.Workload == wl && d.Relay == relay && d.Error == "" {
				return d
			}
		}
		return nil
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	for _, wl := range []string{"w1", "w1batch"} {
		wr, dbz, recv, null := get(wl, relayWalrelay), get(wl, relayDebezium), get(wl, relayRecv), get(wl, relayNull)
		if wr != nil && recv != nil {
			target := 0.9 * recv.EventsPerS
			if dbz != nil {
				target = min(3*dbz.EventsPerS, target)
			}
			fmt.Fprintf(&b, "- %s: walrelay %.0f events/s = %.2f× pg_recvlogical (%.0f)", wl, wr.EventsPerS, wr.EventsPerS/recv.EventsPerS, recv.EventsPerS)
			if dbz != nil {
				fmt.Fprintf(&b, ", %.2f× Debezium (%.0f)", wr.EventsPerS/dbz.EventsPerS, dbz.EventsPerS)
			}
			fmt.Fprintf(&b, "; target ≥ %.0f (min of 3× Debezium, 0.9× pg_recvlogical) and ≥ 0.6× pg_recvlogical: %s.\n", target,
				met(wr.EventsPerS >= target && wr.EventsPerS >= 0.6*recv.EventsPerS))
		}
		// N.B. the walsender decodes on one core: a relay that keeps it
		// busy for nearly the whole drain is as fast as its slot lets it
		// be, whatever a target asks.
		for _, d := range []*Drain{null, wr, get(wl, relayNew), dbz} {
			if d != nil && d.ConfirmedS > 0 && d.WalsenderCPUS > 0 {
				fmt.Fprintf(&b, "- %s: %s kept its walsender busy %.0f%% of the drain (%.1f CPU s in %.1f s); at its CPU per event, a walsender busy throughout streams %.0f events/s.\n",
					wl, d.Relay, 100*d.WalsenderCPUS/d.ConfirmedS, d.WalsenderCPUS, d.ConfirmedS, float64(d.Events)/d.WalsenderCPUS)
			}
		}
		if nw := get(wl, relayNew); nw != nil && recv != nil {
			fmt.Fprintf(&b, "- %s: walrelay on topics it creates %.0f events/s = %.2f× pg_recvlogical; target ≥ 0.9×: %s.\n", wl, nw.EventsPerS, nw.EventsPerS/recv.EventsPerS, met(nw.EventsPerS >= 0.9*recv.EventsPerS))
		}
		if null != nil && recv != nil {
			fmt.Fprintf(&b, "- %s: null sink %.0f events/s = %.2f× pg_recvlogical; target ≥ 0.9×: %s.\n", wl, null.EventsPerS, null.EventsPerS/recv.EventsPerS, met(null.EventsPerS >= 0.9*recv.EventsPerS))
		}
		if wr != nil {
			bound := float64(res.inflightBytes>>20) + memoryBoundSlackMiB
			fmt.Fprintf(&b, "- %s: walrelay peak RSS %.1f MiB; bound ≤ in-flight limit (%d MiB, the default) + %d MiB = %.0f MiB (README, \"Backpressure and memory\"): %s.\n",
				wl, wr.PeakRSSMB, res.inflightBytes>>20, memoryBoundSlackMiB, bound, met(wr.PeakRSSMB <= bound))
		}
		for _, d := range []*Drain{wr, get(wl, relayNew)} {
			if d != nil && len(d.Inflight) > 0 {
				fmt.Fprintf(&b, "- %s: %s in flight (walrelay_inflight_bytes every 250 ms): median %.2f MiB, peak %.2f MiB of the %d MiB limit.\n",
					wl, d.Relay, d.InflightMedianMiB, d.InflightPeakMiB, res.inflightBytes>>20)
			}
		}
		if wr != nil && wr.SteadyRSSMB > 0 {
			fmt.Fprintf(&b, "- %s: walrelay median RSS after 1 s %.1f MiB (%.1f anonymous); aim ≤ 32 MiB: %s.\n", wl, wr.SteadyRSSMB, wr.SteadyAnonMB, met(wr.SteadyRSSMB <= 32))
		}
		if wr != nil && dbz != nil && dbz.CPUSPerMEvents > 0 {
			fmt.Fprintf(&b, "- %s: CPU s per million events: walrelay %.1f, Debezium %.1f (ratio 1/%.1f); target ≤ 1/5: %s.\n", wl, wr.CPUSPerMEvents, dbz.CPUSPerMEvents,
				dbz.CPUSPerMEvents/wr.CPUSPerMEvents, met(wr.CPUSPerMEvents*5 <= dbz.CPUSPerMEvents))
		}
	}
	lat := func(relay string, rate int) *Latency {
		for i := range res.Latency {
			if l := &res.Latency[i]; l.Relay == relay && l.TargetRate == rate && l.Error == "" {
				return l
			}
		}
		return nil
	}
	for _, l := range res.Latency {
		k := lat(relayKafkaFloor, l.TargetRate)
		if l.Relay != relayWalrelay || l.Error != "" || l.SlotFloor == nil || k == nil {
			continue
		}
		both := l.SlotFloor.P50 + k.InsertToConsume.P50
		fmt.Fprintf(&b, "- W2 %d/s: walrelay p50 %.2f ms; slot floor p50 %.2f + Kafka floor p50 %.2f = %.2f ms; walrelay over both floors %.2f× (%+.2f ms)",
			l.TargetRate, l.InsertToConsume.P50, l.SlotFloor.P50, k.InsertToConsume.P50, both, l.InsertToConsume.P50/both, l.InsertToConsume.P50-both)
		if c := lat(relayChainFloor, l.TargetRate); c != nil && c.InsertToConsume.P50 > 0 {
			fmt.Fprintf(&b, "; the floors in series under the same load (chain-floor) p50 %.2f / p99 %.2f ms, walrelay over it %.2f× / %.2f×",
				c.InsertToConsume.P50, c.InsertToConsume.P99, l.InsertToConsume.P50/c.InsertToConsume.P50, l.InsertToConsume.P99/c.InsertToConsume.P99)
		}
		b.WriteString(".\n")
	}
	for _, l := range res.Latency {
		if l.TargetRate == 1000 && l.Error == "" && l.Relay != relayKafkaFloor && l.Relay != relayChainFloor {
			fmt.Fprintf(&b, "- W2 1,000/s: %s p99 %.1f ms (insert → consume)", l.Relay, l.InsertToConsume.P99)
			if l.Relay == relayWalrelay {
				fmt.Fprintf(&b, "; target < 20 ms: %s", met(l.InsertToConsume.P99 < 20))
				if l.SteadyRSSMB > 0 {
					fmt.Fprintf(&b, "; median RSS %.1f MiB (%.1f anonymous), aim ≤ 32 MiB: %s", l.SteadyRSSMB, l.SteadyAnonMB, met(l.SteadyRSSMB <= 32))
				}
			}
			b.WriteString(".\n")
		}
	}
	return b.String()
}
