package main

import (
	"os"
	"testing"
)

// TestGeneratedFileUpToDate checks that the committed matmul_amd64.s is
// what the generator writes: run `go generate ./infer/kernels` after
// changing the generator.
func TestGeneratedFileUpToDate(t *testing.T) {
	want, err := os.ReadFile("../../matmul_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if got := generate(); got != string(want) {
		t.Fatalf("matmul_amd64.s is stale (%d bytes generated, %d committed): run go generate ./infer/kernels", len(got), len(want))
	}
}
