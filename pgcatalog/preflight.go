package pgcatalog

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/preflight"
	"github.com/walrelay/walrelay/replication"
)

// Preflight runs every check of Prepare without creating anything.
func Preflight(ctx context.Context, cfg replication.Config, log *zap.Logger) []preflight.Check {
	p, err := newPrep(ctx, cfg, log, true)
	if err != nil {
		return []preflight.Check{{Name: "connect to PostgreSQL", Err: err}}
	}
	defer p.conn.Close(context.WithoutCancel(ctx))
	checks := []preflight.Check{{Name: "connect to PostgreSQL", Note: fmt.Sprintf("database %q as role %q", p.db, p.user)}}
	for _, step := range p.steps() {
		p.warnings = nil
		note, err := step.run(ctx)
		checks = append(checks, preflight.Check{Name: step.name, Err: err, Note: note, Warnings: p.warnings})
	}
	return checks
}
