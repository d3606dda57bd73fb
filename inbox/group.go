package inbox

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// DynamicMembership as Config.InstanceID turns static group membership
// off: each start is a new member, and a stopped one leaves the group.
const DynamicMembership = "-"

// DefaultInstanceID is Config.InstanceID's default: the host name, stable
// across restarts of a StatefulSet's pod, a VM or a systemd service;
// DynamicMembership when the host has none.
func DefaultInstanceID() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return DynamicMembership
	}
	return h
}

// inUse holds the group/instance pairs of this process's running
// Consumers: two of them with one instance id would fence each other.
var inUse struct {
	sync.Mutex
	m map[[2]string]bool
}

func claimInstance(group, id string) error {
	if id == DynamicMembership {
		return nil
	}
	inUse.Lock()
	defer inUse.Unlock()
	if inUse.m[[2]string{group, id}] {
		return fmt.Errorf("claim instance id: another Consumer of group %s in this process runs with instance id %q (give each its own Config.InstanceID)", group, id)
	}
	if inUse.m == nil {
		inUse.m = map[[2]string]bool{}
	}
	inUse.m[[2]string{group, id}] = true
	return nil
}

func releaseInstance(group, id string) {
	inUse.Lock()
	delete(inUse.m, [2]string{group, id})
	inUse.Unlock()
}

// groupFields are the log fields of this member's place in the group.
func (c *Consumer) groupFields(cl *kgo.Client, m map[string][]int32) []zap.Field {
	member, gen := cl.GroupMetadata()
	var tps []string
	for t, ps := range m {
		for _, p := range ps {
			tps = append(tps, fmt.Sprintf("%s/%d", t, p))
		}
	}
	sort.Strings(tps)
	return []zap.Field{zap.Strings("partitions", tps), zap.String("instance_id", c.cfg.InstanceID),
		zap.String("member_id", member), zap.Int32("generation", gen)}
}

// onAssigned starts a worker per new partition. N.B. with
// BlockRebalanceOnPoll (and this callback registered) it never runs while
// the poll loop dispatches a poll's records.
func (c *Consumer) onAssigned(_ context.Context, cl *kgo.Client, m map[string][]int32) {
	n := 0
	for _, ps := range m {
		n += len(ps)
	}
	if n > 0 { // N.B. a cooperative rebalance that gives nothing new calls it too
		c.log.Info("partitions assigned", c.groupFields(cl, m)...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			k := tp{t, p}
			if c.parts[k] == nil {
				c.parts[k] = newPartition(c, c.base, t, p)
			}
		}
	}
}

// onRevoked lets the revoked partitions' attempts in hand finish and
// commits their offsets before the rebalance goes on, so the next owner
// starts exactly after them.
func (c *Consumer) onRevoked(_ context.Context, cl *kgo.Client, m map[string][]int32) {
	ws := c.detach(m)
	if len(ws) == 0 {
		return
	}
	start := time.Now()
	for _, w := range ws {
		close(w.stop)
	}
	for _, w := range ws {
		<-w.done
		w.cancel()
	}
	c.commitMu.Lock()
	c.commitFinished(cl, ws)
	c.commitMu.Unlock()
	c.log.Info("partitions revoked", append(c.groupFields(cl, m), zap.Duration("handover", time.Since(start)))...)
}

// onLost abandons the lost partitions' work: the group went on without
// this member, another member owns them, and an offset commit would be
// refused.
func (c *Consumer) onLost(_ context.Context, cl *kgo.Client, m map[string][]int32) {
	c.log.Warn("partitions lost (the group went on without this member: session timeout, fenced, or the coordinator lost)", c.groupFields(cl, m)...)
	for _, w := range c.detach(m) {
		w.halt(true)
	}
}

// detach removes the workers of m (all with m nil) from the map.
func (c *Consumer) detach(m map[string][]int32) []*partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ws []*partition
	for k, w := range c.parts {
		if m == nil || containsPartition(m[k.topic], k.p) {
			ws = append(ws, w)
			delete(c.parts, k)
		}
	}
	return ws
}

func containsPartition(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// commitLoop commits every interval the offsets the workers finished,
// each partition as far as it got.
func (c *Consumer) commitLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(c.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// N.B. the partitions are listed under commitMu: a revocation
		// detaches its partitions before it takes commitMu, so a
		// partition listed here is still owned while this commit runs
		// (the rebalance waits for the revocation), and a detached one
		// is committed by its revocation only.
		c.commitMu.Lock()
		c.mu.Lock()
		ws := make([]*partition, 0, len(c.parts))
		for _, w := range c.parts {
			ws = append(ws, w)
		}
		c.mu.Unlock()
		c.commitFinished(c.cl, ws)
		c.commitMu.Unlock()
	}
}

// commitFinished commits, with cl, the offset after each worker's last
// finished record, where it moved. Call it under commitMu.
func (c *Consumer) commitFinished(cl *kgo.Client, ws []*partition) {
	var recs []*kgo.Record
	var of []*partition
	for _, w := range ws {
		if r := w.finished.Load(); r != nil && r.Offset+1 > w.committed {
			recs, of = append(recs, r), append(of, w)
		}
	}
	if len(recs) == 0 {
		return
	}
	// N.B. a context of its own: at shutdown the records finished so far
	// are still committed. The offset is the record's offset + 1 with its
	// leader epoch.
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.CommitRecords(cctx, recs...); err != nil {
		// N.B. not fatal: the records are delivered again (to this member
		// or the partition's new owner) and the inbox table skips them.
		c.commitErrors.Add(1)
		c.log.Warn("commit offsets (the records will be delivered again and skipped as duplicates)", zap.Error(err))
		return
	}
	for i, w := range of {
		w.committed = recs[i].Offset + 1
	}
}

// leaveGroup makes a static member leave at a clean stop
// (Config.LeaveGroupOnStop): kgo's Close does not.
func (c *Consumer) leaveGroup() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := kadm.NewClient(c.cl).LeaveGroup(ctx, kadm.LeaveGroup(c.cfg.Group).InstanceIDs(c.cfg.InstanceID).Reason("inbox consumer stopped"))
	if err != nil {
		c.log.Warn("leave group (its partitions wait for the session timeout)", zap.String("instance_id", c.cfg.InstanceID), zap.Error(err))
		return
	}
	c.log.Info("left the group", zap.String("instance_id", c.cfg.InstanceID))
}
