package pgcatalog

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/decode"
)

// emitPrefixRE finds the prefix a walrelay.emit body emits with.
var emitPrefixRE = regexp.MustCompile(`pg_logical_emit_message\(true, '((?:[^']|'')*)'`)

// checkEmit compares the body of the existing walrelay.emit with the one
// `walrelay setup` would create for dc (its MessagePrefix set): a function left from another
// --message-prefix emits messages walrelay never reads, one left from
// other column flags emits content every event of which is poison. nil
// when they are the same.
func checkEmit(ctx context.Context, conn *pgx.Conn, dc decode.Config) error {
	stmts, err := EmitSQL(dc)
	if err != nil {
		return err
	}
	var want string
	for _, s := range stmts {
		if _, body, ok := strings.Cut(s, " AS $emit$\n"); ok {
			want, _, _ = strings.Cut(body, "$emit$")
		}
	}
	if want == "" {
		return errors.New("find walrelay.emit's body in setup's SQL")
	}
	var got string
	if err := conn.QueryRow(ctx, `SELECT prosrc FROM pg_proc WHERE oid = 'walrelay.emit(text,text,text,jsonb)'::regprocedure`).Scan(&got); err != nil {
		return fmt.Errorf("read walrelay.emit: %w", err)
	}
	if strings.TrimSpace(got) == strings.TrimSpace(want) {
		return nil
	}
	fix := "run `walrelay setup --source messages` with this command's flags again (it replaces the function; --print shows its SQL)"
	if m := emitPrefixRE.FindStringSubmatch(got); m != nil {
		if emitted := strings.ReplaceAll(m[1], "''", "'"); emitted != dc.MessagePrefix {
			return fmt.Errorf("walrelay.emit emits with prefix %q, --message-prefix is %q: walrelay would never read what it emits; %s, or set --message-prefix %s",
				emitted, dc.MessagePrefix, fix, emitted)
		}
	}
	return fmt.Errorf("walrelay.emit is not the function setup creates for these flags (another --id-column, --key-column or --payload-column, or edited by hand): what it emits may not match the mapping; %s", fix)
}
