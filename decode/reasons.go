package decode

import "errors"

// Reasons an outbox row cannot become a Kafka record. Event.Err wraps one of
// them; the sink decides whether such an event halts the relay or is
// dead-lettered.
var (
	ErrMissingColumn   = errors.New("missing column")
	ErrUnsupportedType = errors.New("unsupported column type")
	ErrNullID          = errors.New("null id")
	ErrNullKey         = errors.New("null key")
	ErrEmptyKey        = errors.New("empty key")
	ErrInvalidTopic    = errors.New("invalid topic")
	ErrBadValue        = errors.New("bad column value")
	ErrTooLarge        = errors.New("record too large")
)

// Reason names the class of a poison event's error for headers and
// metrics: null_key, empty_key, null_id, invalid_topic, missing_column,
// unsupported_type, bad_value, too_large, or other.
func Reason(err error) string {
	for _, r := range []struct {
		err  error
		name string
	}{
		{ErrNullKey, "null_key"}, {ErrEmptyKey, "empty_key"}, {ErrNullID, "null_id"},
		{ErrInvalidTopic, "invalid_topic"}, {ErrMissingColumn, "missing_column"},
		{ErrUnsupportedType, "unsupported_type"}, {ErrBadValue, "bad_value"}, {ErrTooLarge, "too_large"},
	} {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "other"
}
