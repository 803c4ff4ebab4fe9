package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchDraftFlagsRange: the speculative-decoding benchmark's
// --temperature must be a finite number from 0 and --draft-window -1 or
// more; a value out of range is a usage error naming the flag, not a run
// that quietly decodes greedily (or with the whole history) and reports
// the value given in its --json.
func TestBenchDraftFlagsRange(t *testing.T) {
	model := stories(t)
	text := filepath.Join(t.TempDir(), "text.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat("Once upon a time there was a little cat. ", 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"bench", "--model", model, "--text", text, "--prompt-tokens", "16", "--gen-tokens", "12", "--reps", "1", "--json"}
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--draft-lookup", "--temperature", "-1"}, "--temperature"},
		{[]string{"--draft-lookup", "--temperature", "NaN"}, "--temperature"},
		{[]string{"--draft-lookup", "--temperature", "Inf"}, "--temperature"},
		{[]string{"--draft-model", model, "--draft-window", "-2"}, "--draft-window"},
		{[]string{"--draft-model", model, "--draft-window", "-7"}, "--draft-window"},
	} {
		t.Run(strings.Join(tc.args[1:], "="), func(t *testing.T) {
			code, out, errOut := runCLI(t, append(base, tc.args...)...)
			if code != exitUsage || !strings.Contains(errOut, tc.flag) || out != "" {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d naming %s and no result", tc.args, code, out, errOut, exitUsage, tc.flag)
			}
		})
	}
}

// TestBenchCPUProfileWholeOrAbsent: --cpuprofile FILE is written only by
// a bench that succeeds. A bench that fails once it has started (here, a
// malformed model) leaves an existing FILE as it was, and no temporary
// file beside it; one that succeeds replaces FILE with its profile.
func TestBenchCPUProfileWholeOrAbsent(t *testing.T) {
	model := stories(t)
	dir := t.TempDir()
	prof := filepath.Join(dir, "keep.prof")
	if err := os.WriteFile(prof, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "truncated.gguf")
	if err := os.WriteFile(bad, b[:5000], 0o644); err != nil {
		t.Fatal(err)
	}
	small := []string{"--prompt-tokens", "4", "--gen-tokens", "2", "--reps", "1", "--cpuprofile", prof}
	code, _, errOut := runCLI(t, append([]string{"bench", "--model", bad}, small...)...)
	if code != exitFailure {
		t.Fatalf("bench of a truncated model: exit %d, want %d (%s)", code, exitFailure, errOut)
	}
	if got, _ := os.ReadFile(prof); string(got) != "precious" {
		t.Errorf("a failed bench replaced the --cpuprofile file with %d bytes", len(got))
	}
	assertOnly := func(want ...string) {
		t.Helper()
		ents, _ := os.ReadDir(dir)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if strings.Join(names, " ") != strings.Join(want, " ") {
			t.Errorf("directory holds %v, want %v", names, want)
		}
	}
	assertOnly("keep.prof", "truncated.gguf")

	if code, _, errOut := runCLI(t, append([]string{"bench", "--model", model}, small...)...); code != exitOK {
		t.Fatalf("bench: exit %d (%s)", code, errOut)
	}
	if got, _ := os.ReadFile(prof); len(got) == 0 || string(got) == "precious" {
		t.Errorf("a bench that succeeded left the --cpuprofile file as %q", got)
	}
	assertOnly("keep.prof", "truncated.gguf")
}

// TestMmapFlag: bench and run hold the model resident without --mmap and
// mapped with it (bench's --json says which), and both decode the same
// tokens.
func TestMmapFlag(t *testing.T) {
	model := stories(t)
	type benchOut struct {
		Weights      string `json:"weights"`
		DecodeDigest string `json:"decode_digest"`
	}
	var bench [2]benchOut
	var text [2]string
	for i, c := range []struct {
		flags   []string
		weights string
	}{{nil, "resident"}, {[]string{"--mmap"}, "mapped"}} {
		code, out, errOut := runCLI(t, append([]string{"bench", "--model", model, "--prompt-tokens", "8", "--gen-tokens", "16", "--reps", "1", "--json"}, c.flags...)...)
		if code != 0 {
			t.Fatalf("bench %v: exit %d: %s", c.flags, code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &bench[i]); err != nil {
			t.Fatalf("bench %v: %v in %q", c.flags, err, out)
		}
		if bench[i].Weights != c.weights {
			t.Errorf("bench %v: weights %q, want %q", c.flags, bench[i].Weights, c.weights)
		}
		code, text[i], errOut = runCLI(t, append([]string{"run", "--model", model, "-p", "Once upon a time", "-n", "24", "--seed", "7", "--no-cache"}, c.flags...)...)
		if code != 0 || text[i] == "" {
			t.Fatalf("run %v: exit %d, stdout %q: %s", c.flags, code, text[i], errOut)
		}
	}
	if bench[0].DecodeDigest == "" || bench[0].DecodeDigest != bench[1].DecodeDigest {
		t.Errorf("decode digests %q (resident) and %q (mapped) differ", bench[0].DecodeDigest, bench[1].DecodeDigest)
	}
	if text[0] != text[1] {
		t.Errorf("run printed %q resident and %q mapped", text[0], text[1])
	}
}
