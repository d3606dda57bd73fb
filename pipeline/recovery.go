package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/recovery"
	"github.com/walrelay/walrelay/replication"
)

// RecoveryConfig is what `walrelay recover` and the relay's own recoveries
// run with: the relay's stages' settings.
func (c Config) RecoveryConfig() recovery.Config {
	return recovery.Config{Replication: c.Replication, Decode: c.Decode, Sink: c.Sink, Marker: c.Marker, Options: c.Recovery}
}

// recoverable reports whether err is a slot walrelay streamed from that is
// gone, or a recovery left unfinished, and the relay recovers it itself
// (--recover-missing-slot).
func (r *Relay) recoverable(err error) bool {
	return r.recovery.Options.MissingSlot && !r.nullSink &&
		(errors.Is(err, replication.ErrSlotGone) || errors.Is(err, kafkastate.ErrRecoveryUnfinished))
}

// recover runs recovery.Recover and logs its account; the next attempt
// streams from the new slot.
func (r *Relay) recover(ctx context.Context) error {
	r.log.Warn("the slot walrelay streamed from is gone: recovering from the outbox table (--recover-missing-slot)", zap.String("slot", r.rc.Slot))
	return r.runRecovery(ctx, recovery.Recover)
}

// backfill runs recovery.Backfill before the first attempt when asked
// (--backfill): it does something only when walrelay's slot is new.
func (r *Relay) backfill(ctx context.Context, stop <-chan struct{}) error {
	if !r.recovery.Options.Backfill || r.nullSink {
		return nil
	}
	// N.B. another instance's backfill (or recovery) of the slot is waited
	// for, as the slot is: it holds the recovery's lock, and once it is
	// done this one has nothing to do.
	for logged := false; ; logged = true {
		err := r.runRecovery(ctx, recovery.Backfill)
		if !errors.Is(err, replication.ErrSlotRecovering) {
			return err
		}
		_, msg := waitFor(err)
		r.enterWait(msg)
		if !logged {
			r.log.Info(msg, zap.String("slot", r.rc.Slot), zap.Error(err))
		}
		select {
		case <-time.After(time.Second):
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *Relay) runRecovery(ctx context.Context, kind recovery.Kind) error {
	// N.B. the marker this process remembers is no longer the slot's: a
	// recovery that fails on the way leaves it saying "unfinished" on
	// Kafka, which the next attempt must read there, not find the slot and
	// stream from it.
	r.hist.forget(r.rc.Slot)
	rcfg, err := withColumns(ctx, r.recovery)
	if err != nil {
		return err
	}
	acc, err := recovery.Run(ctx, rcfg, kind, r.log)
	if err != nil {
		return err
	}
	for _, l := range acc.Lines() {
		r.log.Info(l, zap.String("slot", r.rc.Slot))
	}
	if acc.Nothing == "" {
		r.hist.remember(acc.Marker)
	}
	return nil
}

// Recover is `walrelay recover`: recovery.Run for cfg's slot until SIGINT
// or SIGTERM, its account printed to stdout, one line each; it returns the
// exit code: 0 done, 2 a mistake a person must fix (IsSetupError), 1 else.
func Recover(cfg Config, stdout, stderr io.Writer, log *zap.Logger) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rcfg, err := withColumns(ctx, cfg.RecoveryConfig())
	var acc recovery.Account
	if err == nil {
		acc, err = recovery.Run(ctx, rcfg, recovery.Recover, log)
	}
	for _, l := range acc.Lines() {
		fmt.Fprintln(stdout, l)
	}
	switch {
	case err == nil:
		return 0
	case IsSetupError(err):
		fmt.Fprintf(stderr, "walrelay: recover: %v\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "walrelay: recover: %v\n", err)
	return 1
}

// forget drops what the history remembers of slot's markers.
func (h *history) forget(slot string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, m := range h.known {
		if m.Slot == slot {
			delete(h.known, k)
		}
	}
}

// withColumns checks the outbox's columns as an attempt does (CheckColumns:
// a column the mapping cannot take is refused before anything is created)
// and gives the recovery's decoder the types it resolved.
func withColumns(ctx context.Context, rc recovery.Config) (recovery.Config, error) {
	checked, err := CheckColumns(ctx, rc.Replication.ConnString, rc.Replication.Publication, rc.Decode)
	if err != nil {
		return rc, err
	}
	rc.Decode.Types, rc.Decode.Columns = checked.Types, checked.Columns
	return rc, nil
}
