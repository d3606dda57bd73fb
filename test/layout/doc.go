// Package layout holds the house to its structure budgets (docs/development.md,
// "Layout"): no product Go file over 600 lines, cmd/walrelay at most 900
// lines and, like package pipeline, free of pgx and franz-go, the README at
// most 400 lines.
//
// Input: the repository's files. Output: test failures naming each file
// over its budget. Invariant: it reads files only; it runs nothing.
package layout
