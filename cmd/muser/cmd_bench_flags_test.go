package main

import (
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
