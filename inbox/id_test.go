package inbox

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestCheckID: the ids the inbox table's text column cannot hold are told
// apart from a missing one before any round trip, and the id insert's
// errors that are the id's fault (SQLSTATE class 22, 54000) from an
// outage.
func TestCheckID(t *testing.T) {
	for _, c := range []struct {
		id, class, want string
	}{
		{"3f2a-01", "", ""},
		{"é-ü-😀", "", ""},
		{"", ClassMissingID, "no id header"},
		{"a\x00b", ClassInvalidID, "invalid id header: not valid text: it holds a NUL byte"},
		{"\xff\xfe", ClassInvalidID, "invalid id header: not valid text: it is not UTF-8"},
		{"ab\xc3", ClassInvalidID, "not UTF-8"}, // a cut multi-byte character
	} {
		err := checkID([]byte(c.id))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("checkID(%q) = %v, want nil", c.id, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || idClass(err) != c.class):
			t.Errorf("checkID(%q) = %v (class %s), want %q (class %s)", c.id, err, idClass(err), c.want, c.class)
		}
	}
	for code, want := range map[string]bool{"22021": true, "22P05": true, "54000": true, "08006": false, "40001": false, "23505": false} {
		err := rejectedID(fmt.Errorf("insert id into inbox_processed: %w", &pgconn.PgError{Code: code}))
		if got := errors.Is(err, errInvalidID); got != want {
			t.Errorf("SQLSTATE %s: rejected id %v, want %v (%v)", code, got, want, err)
		}
	}
	if err := rejectedID(errors.New("conn closed")); errors.Is(err, errInvalidID) {
		t.Errorf("a connection error read as a rejected id: %v", err)
	}
}
