package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/blockdraft/blockdrafttest"
)

// blockFor writes a random block drafter (blocks of 4) for the model at
// target and returns its path.
func blockFor(t *testing.T, target string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "block.gguf")
	if err := blockdrafttest.WriteFor(path, target, blockdrafttest.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunDraft runs `muser run` with each draft lane and checks that the
// output is the plain run's, byte for byte, and that -v reports the
// acceptance.
func TestRunDraft(t *testing.T) {
	path := stories(t)
	block := blockFor(t, path)
	for _, sampling := range [][]string{
		{"--temperature", "0"},
		{"--temperature", "0.9", "--seed", "42"},
	} {
		base := append([]string{"run", "--model", path, "-p", "Once upon a time, there was a little girl. The little girl",
			"--max-tokens", "60", "--no-cache"}, sampling...)
		code, want, errOut := runCLI(t, base...)
		if code != exitOK {
			t.Fatalf("plain run: exit %d: %s", code, errOut)
		}
		for _, lane := range []struct {
			args []string
			name string
		}{
			{[]string{"--draft-lookup"}, "lookup"},
			{[]string{"--draft-model", path, "--draft-max", "3"}, "model"},
			{[]string{"--draft-lookup", "--draft-model", path, "--draft-max", "3"}, "lookup+model"},
			{[]string{"--draft-block", block}, "block"},
			{[]string{"--draft-block", block, "--draft-block-device", "cpu"}, "block"},
			{[]string{"--draft-lookup", "--draft-block", block}, "lookup+block"},
		} {
			t.Run(strings.Join(append(sampling, lane.args...), " "), func(t *testing.T) {
				code, got, errOut := runCLI(t, append(append(base, lane.args...), "-v")...)
				if code != exitOK {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				if got != want {
					t.Errorf("output %q, want the plain run's %q", got, want)
				}
				if !strings.Contains(errOut, "speculative decoding: "+lane.name+" lane") {
					t.Errorf("stderr %q does not name the %s lane", errOut, lane.name)
				}
			})
		}
	}
}

func TestRunDraftUsage(t *testing.T) {
	path := stories(t)
	block := blockFor(t, path)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"negative max", []string{"--draft-lookup", "--draft-max", "-2"}, "--draft-max -2"},
		// The embedded default model's tokenizer is not stories260K's.
		{"tokenizer mismatch", []string{"--draft-model", path}, "vocabulary size is 2048 in the model, 512 in the draft model"},
		// A block drafter made for stories260K (hidden size 64).
		{"block for another model", []string{"--draft-block", block}, "--draft-block: block drafter " + block},
		{"model and block", []string{"--draft-model", path, "--draft-block", block}, "--draft-model and --draft-block"},
		{"block device without a block drafter", []string{"--draft-lookup", "--draft-block-device", "model"}, "--draft-block-device model: only with --draft-block"},
		{"cpu block device without a block drafter", []string{"--draft-lookup", "--draft-block-device", "cpu"}, "--draft-block-device cpu: only with --draft-block"},
		{"unknown block device", []string{"--draft-lookup", "--draft-block-device", "gpu"}, `--draft-block-device "gpu": want cpu or model`},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"run", "-p", "hi", "--no-cache", "--max-tokens", "2"}, c.args...)
			code, _, errOut := runCLI(t, args...)
			if code != exitUsage || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d saying %q", code, errOut, exitUsage, c.want)
			}
		})
	}
}

// TestServeDraftUsage checks that serve refuses a draft model of another
// tokenizer before it listens, with exit status 2 naming the difference.
func TestServeDraftUsage(t *testing.T) {
	path := stories(t)
	code, _, errOut := runCLI(t, "serve", "--home", t.TempDir(), "--addr", "127.0.0.1:0", "--draft-model", path)
	if code != exitUsage || !strings.Contains(errOut, "--draft-model") || !strings.Contains(errOut, "vocabulary size is 2048 in the model") {
		t.Errorf("exit %d, stderr %q; want exit %d naming --draft-model and the vocabulary sizes", code, errOut, exitUsage)
	}
	code, _, errOut = runCLI(t, "serve", "--home", t.TempDir(), "--addr", "127.0.0.1:0", "--draft-lookup", "--draft-max", "-1")
	if code != exitUsage || !strings.Contains(errOut, "--draft-max -1") {
		t.Errorf("exit %d, stderr %q; want exit %d naming --draft-max", code, errOut, exitUsage)
	}
}

// TestBenchDraft runs `muser bench` with each draft lane: the JSON names
// the lane, the outputs are identical, and the counts are consistent.
func TestBenchDraft(t *testing.T) {
	path := stories(t)
	block := blockFor(t, path)
	text := filepath.Join(t.TempDir(), "text.txt")
	story := "Once upon a time, there was a little girl named Lily. She liked to play with her ball. One day, Lily went to the park. "
	if err := os.WriteFile(text, []byte(strings.Repeat(story, 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, lane := range []struct {
		args []string
		name string
	}{
		{[]string{"--draft-lookup"}, "lookup"},
		{[]string{"--draft-model", path}, "model"},
		{[]string{"--draft-lookup", "--draft-model", path}, "lookup+model"},
		{[]string{"--draft-block", block}, "block"},
	} {
		t.Run(lane.name, func(t *testing.T) {
			args := append([]string{"bench", "--model", path, "--text", text, "--prompt-tokens", "96", "--gen-tokens", "24",
				"--reps", "1", "--draft-ignore-cost", "--json"}, lane.args...)
			code, out, errOut := runCLI(t, args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var r struct {
				Lane              string
				Identical         bool
				Drafted, Accepted int
				ContextTokens     int `json:"context_tokens"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if r.Lane != lane.name || !r.Identical || r.ContextTokens != 96 {
				t.Errorf("lane %q identical %v context %d, want %q, true, 96", r.Lane, r.Identical, r.ContextTokens, lane.name)
			}
			if r.Drafted == 0 || r.Accepted > r.Drafted {
				t.Errorf("drafted %d, accepted %d: want some drafts, no more accepted than drafted", r.Drafted, r.Accepted)
			}
		})
	}
}
