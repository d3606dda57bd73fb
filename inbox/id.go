package inbox

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
)

// errInvalidID marks a record whose id cannot be recorded in the inbox
// table (class ClassInvalidID): it is dead-lettered at once, whatever
// OnFailure says, as a record without an id is.
var errInvalidID = errors.New("invalid id header")

// checkID says why id cannot be recorded in the inbox table's text column
// before any round trip: errMissingID, errInvalidID (a NUL byte, which
// PostgreSQL text cannot hold, or bytes that are not UTF-8), or nil.
func checkID(id []byte) error {
	switch {
	case len(id) == 0:
		return errMissingID
	case bytes.IndexByte(id, 0) >= 0:
		return fmt.Errorf("%w: not valid text: it holds a NUL byte (PostgreSQL text cannot store it)", errInvalidID)
	case !utf8.Valid(id):
		return fmt.Errorf("%w: not valid text: it is not UTF-8", errInvalidID)
	}
	return nil
}

// idClass is the dead-letter class of checkID's error.
func idClass(err error) string {
	if errors.Is(err, errMissingID) {
		return ClassMissingID
	}
	return ClassInvalidID
}

// rejectedID wraps the id insert's error err with errInvalidID when the
// server refused the id itself rather than being unavailable: a data
// exception (SQLSTATE class 22: the column is not text, an encoding the
// id does not fit) or program_limit_exceeded (54000: the id too long for
// the primary key's btree, at most 2,704 bytes an entry). Otherwise err.
//
// N.B. without it such an error reads as the database's outage (not the
// Handler's failure) and the record is retried for ever: its partition
// stalls.
func rejectedID(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code[:2] == "22" || pgErr.Code == "54000") {
		return fmt.Errorf("%w: the inbox table refused it: %w", errInvalidID, err)
	}
	return err
}
