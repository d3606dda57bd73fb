package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Header returns the value of r's header key, "" when r has none.
func Header(r *kgo.Record, key string) string { return string(header(r, key)) }

// Events is a Handler that dispatches each record by its event type (a
// header) to the handler registered for that type with On, which gets the
// record's value decoded from JSON. Use its Handle as Config.Handler:
//
//	var ev inbox.Events
//	inbox.On(&ev, "OrderCreated", func(ctx context.Context, tx pgx.Tx, r *kgo.Record, o OrderCreated) error { ... })
//	cfg.Handler = ev.Handle
//
// Register every type before Run; Events is not safe to change while it
// handles records.
type Events struct {
	// TypeHeader is the header holding the event type. Default
	// "eventType" (walrelay --header-columns type:eventType, Debezium's
	// table.fields.additional.placement=type:header:eventType).
	TypeHeader string
	// Unknown handles a record of a type no handler was registered for
	// (or without the header). Default: a Permanent error, so the record
	// is dead-lettered (and can be replayed with Redrive once a handler
	// exists) rather than marked processed without an effect. SkipUnknown
	// marks it processed instead.
	Unknown Handler

	handlers map[string]Handler
}

// SkipUnknown, as Events.Unknown, marks records of unknown event types
// processed without an effect: for a consumer that reads only some types
// of a topic on purpose.
func SkipUnknown(context.Context, pgx.Tx, *kgo.Record) error { return nil }

// On registers h for the records of eventType (a later On of the same type
// replaces it). The record's value is decoded from JSON into a T (fields
// T lacks are ignored; numbers held as any are json.Number, exact); a value
// that does not decode is a Permanent error: the record is dead-lettered
// at once.
func On[T any](e *Events, eventType string, h func(ctx context.Context, tx pgx.Tx, r *kgo.Record, v T) error) {
	if e.handlers == nil {
		e.handlers = map[string]Handler{}
	}
	e.handlers[eventType] = func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
		var v T
		dec := json.NewDecoder(bytes.NewReader(r.Value))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return Permanent(fmt.Errorf("decode %s payload as %T: %w", eventType, v, err))
		}
		return h(ctx, tx, r, v)
	}
}

// Handle is the Handler: it runs the handler of r's event type.
func (e *Events) Handle(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
	th := e.TypeHeader
	if th == "" {
		th = "eventType"
	}
	typ := Header(r, th)
	if h, ok := e.handlers[typ]; ok {
		return h(ctx, tx, r)
	}
	if e.Unknown != nil {
		return e.Unknown(ctx, tx, r)
	}
	return Permanent(fmt.Errorf("no handler for event type %q (header %s): register one with inbox.On, or set Events.Unknown", typ, th))
}
