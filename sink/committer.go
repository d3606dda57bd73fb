package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// committer commits the open Kafka transaction when it is due and no
// PostgreSQL transaction is being handed over, and fails the sink when one
// takes too long for the transaction timeout.
func (s *Sink) committer() {
	e := s.eos
	tick := time.NewTicker(max(s.cfg.CommitInterval/2, 5*time.Millisecond))
	defer tick.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.closing
		// N.B. a commit in flight may finish: its outcome then is known
		// (a zombie learns it was fenced), and Close waits for it.
		time.Sleep(5 * time.Second)
		cancel()
	}()
	select {
	case <-s.closing:
		return
	case <-s.failed:
		return
	case <-e.activate:
	}
	e.mu.Lock()
	err := s.eosInit(ctx)
	e.mu.Unlock()
	if err != nil {
		s.fail(err)
		return
	}
	for {
		select {
		case <-s.closing:
			return
		case <-s.failed:
			return
		case <-tick.C:
		}
		if b := e.began.Load(); b != 0 && e.inPG.Load() && time.Since(time.Unix(0, b)) > s.cfg.txnLimit() {
			// N.B. the broker would abort the transaction at its timeout;
			// walrelay gives up first, and says which transaction and what
			// to raise.
			s.fail(fmt.Errorf("%w: transaction xid %d (commit lsn %s, %d records handed over so far) was not relayed within 3/4 of --kafka-transaction-timeout %s: raise --kafka-transaction-timeout (at most the broker's transaction.max.timeout.ms, default 15m) or commit smaller transactions; nothing of it is committed or confirmed",
				ErrTransactionTooLong, e.curXid.Load(), pglogrepl.LSN(e.curLSN.Load()), e.curRecs.Load(), s.cfg.TransactionTimeout))
			return
		}
		if !e.mu.TryLock() {
			continue
		}
		if !e.inPG.Load() && s.due() {
			s.commit(ctx) // its failure fails the sink
		}
		e.mu.Unlock()
	}
}
