// Package preflight holds the one result type of walrelay's preflight
// checks (walrelay check, and the checks run before streaming).
//
// Input: nothing; output: Check, a named outcome with an error, a note and
// warnings. Invariant: a Check with a nil Err passed.
package preflight
