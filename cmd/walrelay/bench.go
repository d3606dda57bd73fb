//go:build bench

package main

import (
	"flag"
	"os"
	"runtime/pprof"
)

// The bench build (go build -tags bench, `make bench`) adds two switches
// for benchmarks that the product's flag set must not have: a null sink
// that drops events and confirms past them, and a CPU profile of the whole
// run.
func init() {
	benchFlags = func(fs *flag.FlagSet, cfg *config) {
		fs.StringVar(&cfg.cpuProfile, "cpu-profile", "", "BENCH BUILD ONLY: write a Go CPU profile to this file until exit")
		fs.BoolVar(&cfg.NullSink, "bench-null-sink", false, "BENCH BUILD ONLY: acknowledge events without sending them to Kafka, confirming the slot past them (events are dropped)")
	}
	startProfile = func(path string) (func(), error) {
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		return func() {
			pprof.StopCPUProfile()
			f.Close()
		}, nil
	}
}
