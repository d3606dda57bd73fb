package e2e

import (
	"testing"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
)

// The helpers the end-to-end packages share (package e2etest), under the
// names this package's tests use.
type (
	env       = e2etest.Env
	relayProc = e2etest.Proc
	collector = e2etest.Collector
)

func newEnv(t *testing.T) *env {
	t.Helper()
	return e2etest.NewEnv(t)
}
