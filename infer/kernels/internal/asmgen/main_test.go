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

// TestGeneratedKFileUpToDate is TestGeneratedFileUpToDate for
// rawt_k_amd64.s (asmgen -k).
func TestGeneratedKFileUpToDate(t *testing.T) {
	want, err := os.ReadFile("../../rawt_k_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if got := generateK(); got != string(want) {
		t.Fatalf("rawt_k_amd64.s is stale (%d bytes generated, %d committed): run go generate ./infer/kernels", len(got), len(want))
	}
}
