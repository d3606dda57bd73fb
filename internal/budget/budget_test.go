package budget

import (
	"context"
	"testing"
	"time"
)

func TestAcquireWaitsForRelease(t *testing.T) {
	b := New(100)
	if !b.TryAcquire(60) || b.TryAcquire(50) {
		t.Fatal("60 then 50 of 100: the second must not fit")
	}
	got := make(chan bool)
	go func() { got <- b.Acquire(context.Background(), 50, nil) }()
	select {
	case <-got:
		t.Fatal("Acquire returned before anything was released")
	case <-time.After(50 * time.Millisecond):
	}
	b.Release(60)
	if ok := <-got; !ok {
		t.Fatal("Acquire failed after a release made room")
	}
	if u := b.Used(); u != 50 {
		t.Fatalf("used %d, want 50", u)
	}
}

func TestOversizedPassesAlone(t *testing.T) {
	b := New(100)
	if !b.TryAcquire(1000) {
		t.Fatal("an item larger than the limit must pass when the budget is empty")
	}
	if b.TryAcquire(1) {
		t.Fatal("nothing fits beside an oversized item")
	}
	b.Release(1000)
	if !b.TryAcquire(1) {
		t.Fatal("the budget is empty again")
	}
}

func TestAcquireStops(t *testing.T) {
	b := New(10)
	b.TryAcquire(10)
	stop := make(chan struct{})
	close(stop)
	if b.Acquire(context.Background(), 5, stop) {
		t.Fatal("Acquire succeeded without room")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if b.Acquire(ctx, 5, nil) {
		t.Fatal("Acquire succeeded without room")
	}
	if u := b.Used(); u != 10 {
		t.Fatalf("a failed Acquire counted: used %d", u)
	}
}
