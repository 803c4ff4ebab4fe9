package main

import (
	"os"
	"testing"
)

// TestGeneratedFileUpToDate checks that the committed hash_amd64.s is what
// the generator writes: run `go generate ./internal/b3` after changing it.
func TestGeneratedFileUpToDate(t *testing.T) {
	want, err := os.ReadFile("../../hash_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if got := generate(); got != string(want) {
		t.Fatalf("hash_amd64.s is stale (%d bytes generated, %d committed): run go generate ./internal/b3", len(got), len(want))
	}
}
