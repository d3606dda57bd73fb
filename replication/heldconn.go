package replication

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// pendingConn is a SQL connection being opened in the background: the
// one heldPosition reads through is opened while the replication
// connection is, so that the stream's start waits for one connection's
// start, not two one after the other (a busy server forks each backend
// slowly: docs/performance.md, "Start-up").
type pendingConn struct {
	done   chan struct{}
	conn   *pgx.Conn
	err    error
	closed sync.Once
}

// openSQL starts opening a ConnectSQL connection of connString.
func openSQL(ctx context.Context, connString string) *pendingConn {
	p := &pendingConn{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.conn, p.err = ConnectSQL(ctx, connString)
	}()
	return p
}

// get waits for the connection, or for ctx.
func (p *pendingConn) get(ctx context.Context) (*pgx.Conn, error) {
	select {
	case <-p.done:
		return p.conn, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// close closes the connection once it is open (at once if it is), without
// waiting for it; again, it does nothing.
func (p *pendingConn) close() {
	p.closed.Do(func() {
		go func() {
			<-p.done
			if p.conn != nil {
				p.conn.Close(context.Background())
			}
		}()
	})
}
