// Package httpserve is walrelay's bounded HTTP server: /metrics, /healthz,
// /readyz and, opt-in, Go's profiling endpoints; and the probe of a running
// walrelay's /readyz (`walrelay health`).
//
// Input: an address, limits, a metrics gatherer and the relay's probes.
// Output: the endpoints, served until the context ends. Invariant: every
// connection is bounded in time and in number (a connection serving a
// request is never closed to make room; an idle or slow one is).
package httpserve
