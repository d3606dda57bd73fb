// Package cli is a small flag kit for a program of sub-commands: typed
// flag values whose errors name the format wanted, parsing with an
// environment overlay (--pg-url as WALRELAY_PG_URL), did-you-mean hints
// and per-command help; and the version a build reports (BuildVersion).
//
// Input: a flag.FlagSet, the command line and the environment. Output: the
// flags set, or one error per mistake that says what to type instead.
// Invariant: a flag given on the command line wins over its environment
// variable; nothing is printed but the help asked for with -h.
package cli
