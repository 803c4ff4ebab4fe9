package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
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

// TestRunHelpCacheClaim holds run --help to what the store does: a run
// warms later runs, but muser serve salts its tenants' blocks, so a
// server on the same home computes the prompt afresh (docs/engine.md,
// "muser run"). The help must not promise that serve starts warm.
func TestRunHelpCacheClaim(t *testing.T) {
	path := stories(t)
	home := t.TempDir()
	prompt := storiesGolden(t)[:300]
	if code, _, errOut := runCLI(t, "run", "--model", path, "-p", prompt, "-n", "2", "--temperature", "0", "--home", home); code != exitOK {
		t.Fatalf("run: exit %d, %s", code, errOut)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := serveCLI(t, ctx, path, home)
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 2, "temperature": 0})
	resp, err := http.Post(srv.url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Usage struct {
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("completion: %d, %v", resp.StatusCode, err)
	}
	cancel()
	if c := <-srv.code; c != exitOK {
		t.Fatalf("serve exit %d (stderr %s)", c, srv.stderr.String())
	}
	_, help, _ := runCLI(t, "run", "--help")
	claims := strings.Contains(strings.Join(strings.Fields(help), " "), "(or muser serve) with the same prefix starts warm")
	if out.Usage.Details.Cached == 0 && claims {
		t.Errorf("serve after run restored 0 cached tokens, but run --help says a later muser serve with the same prefix starts warm")
	}
	if out.Usage.Details.Cached > 0 {
		t.Errorf("serve restored %d tokens published by run; docs/engine.md says run's packs are not serve's", out.Usage.Details.Cached)
	}
}
