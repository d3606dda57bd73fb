package main

import "testing"

func TestPkgOf(t *testing.T) {
	for _, c := range []struct{ sym, want string }{
		{"github.com/twmb/franz-go/pkg/kgo.(*Client).Produce", "github.com/twmb/franz-go/pkg/kgo"},
		{"runtime.mallocgc", "runtime"},
		{"slices.SortFunc[go.shape.[]github.com/x/y.T,go.shape.T]", "slices"},
		{"github.com/walrelay/walrelay/sink.(*Sink).produceEvents.func1", "github.com/walrelay/walrelay/sink"},
		{"main.main", "main"},
	} {
		if got := pkgOf(c.sym); got != c.want {
			t.Errorf("pkgOf(%q) = %q, want %q", c.sym, got, c.want)
		}
	}
}

func TestOverlap(t *testing.T) {
	for _, c := range []struct{ a, b, c, d, want uint64 }{
		{0, 4096, 100, 200, 100},
		{0, 4096, 4000, 5000, 96},
		{4096, 8192, 0, 4096, 0},
		{0, 4096, 0, 4096, 4096},
	} {
		if got := overlap(c.a, c.b, c.c, c.d); got != c.want {
			t.Errorf("overlap(%d, %d, %d, %d) = %d, want %d", c.a, c.b, c.c, c.d, got, c.want)
		}
	}
}
