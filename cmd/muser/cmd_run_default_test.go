package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// TestRunDefaultModelGolden runs the embedded default model greedily, as
// `muser run` does without --model, and compares the whole output with a
// committed golden file: the engine is exact, so any change to the output
// is a change to the numerics (or to the model) and must be deliberate.
// Rewrite the files with `go test ./cmd/muser -run DefaultModelGolden -update`.
func TestRunDefaultModelGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"story", []string{"-p", "Once upon a time", "--max-tokens", "80"}},
		{"chat", []string{"--chat", "-p", "What colour is the sky?", "--max-tokens", "40"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, threads := range []string{"1", "2"} {
				args := append([]string{"run", "--temperature", "0", "--no-cache", "--threads", threads}, c.args...)
				code, out, errOut := runCLI(t, args...)
				if code != exitOK {
					t.Fatalf("exit %d, stderr %q", code, errOut)
				}
				path := filepath.Join("testdata", "golden", "default-"+c.name+".txt")
				if *updateGolden && threads == "1" {
					if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if out != string(want) {
					t.Errorf("--threads %s: output\n%q\nwant (%s)\n%q", threads, out, path, want)
				}
			}
		})
	}
}
