package main

import "testing"

// TestIndependent: no two compat connectors share a slot, publication,
// topic or (on the Connect worker) topic.prefix.
func TestIndependent(t *testing.T) {
	if err := independent("postgres://u:p@127.0.0.1:5432/compat", configurations()); err != nil {
		t.Fatal(err)
	}
}
