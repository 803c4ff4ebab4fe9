package main

import (
	"strings"
	"testing"
)

// TestRunSamplingFlagsNamed: a sampling flag out of range is a usage error
// that names the flag as it was typed (--top-p, not the API's top_p) in
// the command's own words ("muser run: ..." and the pointer to --help).
func TestRunSamplingFlagsNamed(t *testing.T) {
	model := stories(t)
	for _, tc := range []struct {
		flag, value string
	}{
		{"--temperature", "-1"},
		{"--temperature", "NaN"},
		{"--top-k", "-1"},
		{"--top-p", "2"},
		{"--top-p", "-0.5"},
		{"--min-p", "1.5"},
		{"--repeat-penalty", "-2"},
		{"--repeat-penalty", "+Inf"},
	} {
		t.Run(tc.flag+"="+tc.value, func(t *testing.T) {
			code, out, errOut := runCLI(t, "run", "--model", model, "-p", "hi", "--no-cache", tc.flag+"="+tc.value)
			want := "muser run: " + tc.flag + " "
			if code != exitUsage || !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, "muser run --help") || out != "" {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want exit %d, stderr beginning %q and pointing to --help",
					tc.flag, tc.value, code, out, errOut, exitUsage, want)
			}
		})
	}
}
