package budget

import (
	"context"
	"sync"
)

// Budget counts bytes against a limit, and against an Account of a Pool
// when it has one. One goroutine may wait in Acquire (or on Wake) at a
// time; any may Release.
type Budget struct {
	mu      sync.Mutex
	used    int64
	limit   int64
	wake    chan struct{}
	acct    *Account      // nil: no pool
	drained chan struct{} // closed once used is 0 (Drained)
}

// New returns a budget of limit bytes.
func New(limit int64) *Budget {
	return &Budget{limit: limit, wake: make(chan struct{}, 1)}
}

// NewIn returns a budget of limit bytes that counts against acct too
// (nil: none).
func NewIn(limit int64, acct *Account) *Budget {
	b := New(limit)
	b.acct = acct
	return b
}

// TryAcquire counts n if it fits. Anything fits in an empty budget, so a
// single item larger than the limit passes alone.
func (b *Budget) TryAcquire(n int64) bool {
	ok, _ := b.tryAcquire(n)
	return ok
}

// tryAcquire is TryAcquire; when the pool refused, it returns the channel
// that the pool's next release closes.
func (b *Budget) tryAcquire(n int64) (bool, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used != 0 && b.used+n > b.limit {
		return false, nil
	}
	if b.acct != nil {
		if ok, changed := b.acct.tryAcquire(n); !ok {
			return false, changed
		}
	}
	b.used += n
	return true, nil
}

// Acquire waits until n fits (true), or until ctx is done or stop is closed
// (false).
func (b *Budget) Acquire(ctx context.Context, n int64, stop <-chan struct{}) bool {
	for {
		ok, pool := b.tryAcquire(n)
		if ok {
			return true
		}
		select {
		case <-b.wake:
		case <-pool: // nil unless the pool refused
		case <-ctx.Done():
			b.gaveUp(pool)
			return false
		case <-stop:
			b.gaveUp(pool)
			return false
		}
	}
}

// gaveUp ends the account's wait for the pool, if it waited.
func (b *Budget) gaveUp(pool <-chan struct{}) {
	if pool != nil {
		b.acct.stopWaiting()
	}
}

// Wake receives after a Release; a waiter then tries again.
func (b *Budget) Wake() <-chan struct{} { return b.wake }

// Release returns n bytes.
func (b *Budget) Release(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.used == 0 && b.drained != nil {
		close(b.drained)
		b.drained = nil
	}
	b.mu.Unlock()
	if b.acct != nil {
		b.acct.release(n)
	}
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Used is the bytes counted now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Drained is closed once nothing is counted (at once if nothing is now).
func (b *Budget) Drained() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used == 0 {
		return closed
	}
	if b.drained == nil {
		b.drained = make(chan struct{})
	}
	return b.drained
}

// closed is a channel that is closed.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
