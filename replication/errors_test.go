package replication

import (
	"errors"
	"testing"
)

// TestStreamErrorsWrapTheirSentinels: the stream's slot-gone error is a
// lost slot (exit 3), not a setup error; its setup errors are (exit 2).
func TestStreamErrorsWrapTheirSentinels(t *testing.T) {
	gone := error(&slotGoneError{msg: "gone"})
	if !errors.Is(gone, ErrSlotGone) || !errors.Is(gone, ErrSlotLost) || errors.Is(gone, ErrSetup) {
		t.Errorf("slot gone error: Is(ErrSlotGone)=%v Is(ErrSlotLost)=%v Is(ErrSetup)=%v; want true, true, false",
			errors.Is(gone, ErrSlotGone), errors.Is(gone, ErrSlotLost), errors.Is(gone, ErrSetup))
	}
	if setup := setupErrorf("bad %s", "flag"); !errors.Is(setup, ErrSetup) || errors.Is(setup, ErrSlotLost) || setup.Error() != "bad flag" {
		t.Errorf("setup error %q: Is(ErrSetup)=%v Is(ErrSlotLost)=%v; want true, false", setup, errors.Is(setup, ErrSetup), errors.Is(setup, ErrSlotLost))
	}
}
