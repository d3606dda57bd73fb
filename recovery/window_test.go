package recovery

import (
	"strings"
	"testing"
	"time"
)

// TestRecoveryWindow: the retention recovery needs is the window plus the
// margin; a window of 0 or less is refused, naming the default.
func TestRecoveryWindow(t *testing.T) {
	o := Options{Window: 36 * time.Hour, Margin: 5 * time.Minute}
	if got, want := o.Retention(), 36*time.Hour+5*time.Minute; got != want {
		t.Errorf("Retention() = %s, want %s", got, want)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
	o.Window = 0
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--recovery-window 0s: want more than 0 (default 168h0m0s)") {
		t.Errorf("Validate() with no window = %v", err)
	}
}
