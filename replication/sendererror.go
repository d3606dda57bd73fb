package replication

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// errNotHeld is wrapped by heldPosition's error when the slot is not held
// by the walsender of the stream's connection.
var errNotHeld = errors.New("not held by this stream's walsender")

// senderError returns the error the walsender of conn sent when it let go
// of the slot right after START_REPLICATION, or notHeld when it sent none
// within a status interval.
//
// N.B. a walsender that fails while decoding (a character the client
// encoding lacks, 22P05; a publication missing from the historic catalog)
// sends an ErrorResponse and releases the slot at once, often before
// heldPosition looks: the restart loop logged only "not held by this
// stream's walsender", attempt after attempt, and hid the error that
// repeats. Messages before the error are dropped: nothing was handed on,
// and the next attempt starts from the confirmed position.
func (s *Stream) senderError(ctx context.Context, conn *pgconn.PgConn, notHeld error) error {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.StatusInterval)
	defer cancel()
	for {
		msg, err := conn.ReceiveMessage(rctx)
		if err != nil {
			return notHeld
		}
		switch msg := msg.(type) {
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("replication stream: %w", pgconn.ErrorResponseToPgError(msg))
		case *pgproto3.CopyDone:
			return notHeld
		}
	}
}
