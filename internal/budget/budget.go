package budget

import (
	"context"
	"sync"
)

// Budget counts bytes against a limit. One goroutine may wait in Acquire
// (or on Wake) at a time; any may Release.
type Budget struct {
	mu    sync.Mutex
	used  int64
	limit int64
	wake  chan struct{}
}

// New returns a budget of limit bytes.
func New(limit int64) *Budget {
	return &Budget{limit: limit, wake: make(chan struct{}, 1)}
}

// TryAcquire counts n if it fits. Anything fits in an empty budget, so a
// single item larger than the limit passes alone.
func (b *Budget) TryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used == 0 || b.used+n <= b.limit {
		b.used += n
		return true
	}
	return false
}

// Acquire waits until n fits (true), or until ctx is done or stop is closed
// (false).
func (b *Budget) Acquire(ctx context.Context, n int64, stop <-chan struct{}) bool {
	for !b.TryAcquire(n) {
		select {
		case <-b.wake:
		case <-ctx.Done():
			return false
		case <-stop:
			return false
		}
	}
	return true
}

// Wake receives after a Release; a waiter then tries again.
func (b *Budget) Wake() <-chan struct{} { return b.wake }

// Release returns n bytes.
func (b *Budget) Release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
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
