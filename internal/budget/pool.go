package budget

import (
	"sync"
	"time"
)

// Pool is a bound that the Budgets of several holders count against
// besides their own (a process's in-flight bytes over its pipelines).
// Half the limit is reserved, in equal shares, one to each Account: an
// account below its reserve never waits for the others, so one holder
// whose bytes are stuck (its Kafka partition not answering) cannot stop
// another. Beyond its reserve an account borrows what no account's
// reserve or borrowing holds (the other half, and the reserves' unused
// part is not lent), and waits while there is none.
//
// Invariant: the sum over accounts of max(held, reserve) stays within the
// limit, except that an account holding nothing may take one item of any
// size (as a Budget: an item larger than its share passes alone).
type Pool struct {
	mu       sync.Mutex
	limit    int64
	accounts int
	reserve  int64 // limit / accounts
	claimed  int64 // Σ max(held, reserve)
	used     int64 // Σ held
	changed  chan struct{}
}

// NewPool returns a pool of limit bytes for accounts accounts.
func NewPool(limit int64, accounts int) *Pool {
	accounts = max(accounts, 1)
	r := limit / int64(2*accounts)
	return &Pool{limit: limit, accounts: accounts, reserve: r, claimed: r * int64(accounts)}
}

// Account is one holder's share of a pool; its Budgets (one at a time, and
// those it leaves behind releasing late) count against it.
type Account struct {
	p    *Pool
	held int64 // under p.mu
	// waiting is when the current wait for the pool began (unix
	// nanoseconds), 0 when not waiting; under p.mu.
	waiting int64
}

// Account returns a new account of the pool: NewPool's accounts of them.
func (p *Pool) Account() *Account { return &Account{p: p} }

// Limit is the pool's limit, Reserve each account's reserved share.
func (p *Pool) Limit() int64   { return p.limit }
func (p *Pool) Reserve() int64 { return p.reserve }

// Used is what the accounts hold together.
func (p *Pool) Used() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// WaitingSince is when the account began waiting for room in the pool,
// zero when it does not wait.
func (a *Account) WaitingSince() time.Time {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	if a.waiting == 0 {
		return time.Time{}
	}
	return time.Unix(0, a.waiting)
}

// Held is what the account holds.
func (a *Account) Held() int64 {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	return a.held
}

// tryAcquire counts n if the account's reserve or the pool's free bytes
// take it; otherwise it returns a channel closed at the next release.
func (a *Account) tryAcquire(n int64) (bool, <-chan struct{}) {
	p := a.p
	p.mu.Lock()
	defer p.mu.Unlock()
	before := max(a.held, p.reserve)
	after := max(a.held+n, p.reserve)
	if a.held == 0 || p.claimed+after-before <= p.limit {
		p.claimed += after - before
		p.used += n
		a.held += n
		a.waiting = 0
		return true, nil
	}
	if a.waiting == 0 {
		a.waiting = time.Now().UnixNano()
	}
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	return false, p.changed
}

// release returns n bytes of the account.
func (a *Account) release(n int64) {
	p := a.p
	p.mu.Lock()
	defer p.mu.Unlock()
	before := max(a.held, p.reserve)
	a.held -= n
	p.used -= n
	p.claimed += max(a.held, p.reserve) - before
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

// stopWaiting says the account's wait ended without room (its holder gave up).
func (a *Account) stopWaiting() {
	a.p.mu.Lock()
	a.waiting = 0
	a.p.mu.Unlock()
}
