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

// checkEmit compares the bodies of the existing walrelay.emit functions
// with those `walrelay setup` would create for dc (its MessagePrefix
// set): a function left from another --message-prefix emits messages
// walrelay never reads, one left from other column flags emits content
// every event of which is poison. The overload with the trace context is
// checked when it exists (an older setup made none). nil when they are
// the same.
func checkEmit(ctx context.Context, conn *pgx.Conn, dc decode.Config) error {
	stmts, err := EmitSQL(dc)
	if err != nil {
		return err
	}
	want := map[string]string{} // by regprocedure signature
	for _, s := range stmts {
		head, body, ok := strings.Cut(s, " AS $emit$\n")
		if !ok {
			continue
		}
		sig := "walrelay.emit(text,text,text,jsonb)"
		if strings.Contains(head, "traceparent text") {
			sig = "walrelay.emit(text,text,text,jsonb,text)"
		}
		want[sig], _, _ = strings.Cut(body, "$emit$")
	}
	if want["walrelay.emit(text,text,text,jsonb)"] == "" {
		return errors.New("find walrelay.emit's body in setup's SQL")
	}
	for _, sig := range []string{"walrelay.emit(text,text,text,jsonb)", "walrelay.emit(text,text,text,jsonb,text)"} {
		body, ok := want[sig]
		if !ok {
			continue
		}
		var got *string
		if err := conn.QueryRow(ctx, `SELECT (SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure($1))`, sig).Scan(&got); err != nil {
			return fmt.Errorf("read %s: %w", sig, err)
		}
		if got == nil {
			continue // N.B. only the first is required: MessagesCheck asks for it
		}
		if err := sameEmit(*got, body, dc); err != nil {
			return err
		}
	}
	return nil
}

// sameEmit compares an existing walrelay.emit body, got, with want.
func sameEmit(got, want string, dc decode.Config) error {
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
	return fmt.Errorf("walrelay.emit is not the function setup creates for these flags (another --id-column, --key-column, --payload-column or --trace-context-column, or edited by hand): what it emits may not match the mapping; %s", fix)
}
