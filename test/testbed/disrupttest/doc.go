// Package disrupttest checks that the test bed can stop, start and restart
// its servers (testbed.Disrupt) and that clients work again afterwards.
// Input: a managed test bed (testbed.MainDisruptive). Output: test results.
// Invariant: every fault is injected for real (a test that cannot inject
// one fails), and the bed is whole again when each test ends.
package disrupttest
