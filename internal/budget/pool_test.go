package budget

import (
	"context"
	"testing"
)

// A pool of 200 for 4 accounts: 25 each always theirs, the other 100
// lent to whoever needs more.
func TestPoolReservesAndBorrowing(t *testing.T) {
	p := NewPool(200, 4)
	a, b := NewIn(1000, p.Account()), NewIn(1000, p.Account())
	if p.Reserve() != 25 {
		t.Fatalf("reserve %d, want 25", p.Reserve())
	}
	// a borrows all that is lent: its 25 and the 100.
	if !a.TryAcquire(20) || !a.TryAcquire(105) {
		t.Fatal("a: 125 of 200 with 25 reserved for each of the three others must fit")
	}
	if a.TryAcquire(1) {
		t.Fatal("a: 126 would eat into the others' reserves")
	}
	if a.acct.WaitingSince().IsZero() {
		t.Fatal("a's refused try must show it waiting for the pool")
	}
	// b's reserve is its own whatever a holds.
	if !b.TryAcquire(25) {
		t.Fatal("b: its 25 reserved must fit while a borrows")
	}
	if b.TryAcquire(1) {
		t.Fatal("b: nothing is left to borrow")
	}
	if got := p.Used(); got != 150 {
		t.Fatalf("pool used %d, want 150", got)
	}
	// a's release makes room for b's borrowing.
	got := make(chan bool)
	go func() { got <- b.Acquire(context.Background(), 10, nil) }()
	a.Release(20)
	if !<-got {
		t.Fatal("b's wait must end once a released")
	}
	if !b.acct.WaitingSince().IsZero() {
		t.Fatal("b no longer waits")
	}
	if p.Used() != 140 || a.acct.Held() != 105 || b.acct.Held() != 35 {
		t.Fatalf("used %d, a %d, b %d: want 140, 105, 35", p.Used(), a.acct.Held(), b.acct.Held())
	}
}

// The budget's own limit binds first; a budget holding nothing passes
// one item of any size even when the pool is taken.
func TestPoolOwnLimitAndFirstItem(t *testing.T) {
	p := NewPool(200, 2) // 50 reserved each, 100 lent
	a, b := NewIn(30, p.Account()), NewIn(1000, p.Account())
	if !a.TryAcquire(30) || a.TryAcquire(1) {
		t.Fatal("a's own limit of 30 must bind before the pool's")
	}
	if !b.TryAcquire(150) || b.TryAcquire(1) {
		t.Fatal("b: 150 (its 50 and the 100 lent) fits beside a's 30 of its reserve, then nothing")
	}
	c := NewIn(1000, p.Account()) // a third account past NewPool's two
	if !c.TryAcquire(500) {
		t.Fatal("an account holding nothing passes one item")
	}
	if c.TryAcquire(1) {
		t.Fatal("nothing beside it")
	}
	c.Release(500)
	a.Release(30)
	b.Release(150)
	if p.Used() != 0 || p.claimed != 100 {
		t.Fatalf("after every release: used %d, claimed %d; want 0, 100", p.Used(), p.claimed)
	}
}

// A wait for the pool that gives up stops showing.
func TestPoolWaitGivesUp(t *testing.T) {
	p := NewPool(20, 2) // 5 reserved each, 10 lent
	a, b := NewIn(100, p.Account()), NewIn(100, p.Account())
	a.TryAcquire(15)
	b.TryAcquire(5)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if b.Acquire(ctx, 1, nil) {
		t.Fatal("no room: Acquire must fail on a done context")
	}
	if !b.acct.WaitingSince().IsZero() {
		t.Fatal("a wait given up must not show")
	}
}

func TestDrained(t *testing.T) {
	b := New(100)
	select {
	case <-b.Drained():
	default:
		t.Fatal("an empty budget is drained")
	}
	b.TryAcquire(10)
	b.TryAcquire(20)
	d := b.Drained()
	b.Release(10)
	select {
	case <-d:
		t.Fatal("20 still held")
	default:
	}
	b.Release(20)
	<-d
}
