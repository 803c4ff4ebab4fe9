package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel/evalset"
)

func storiesGolden(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "models", "golden", "stories260K.llama2c-test_all.expected.txt"))
	if err != nil {
		t.Skipf("shared golden text not available: %v", err)
	}
	return string(b)
}

// TestRunGolden is the must-show through the real command: greedy
// output for "Once upon a time" begins with llama2.c's expected text.
func TestRunGolden(t *testing.T) {
	path := stories(t)
	want := storiesGolden(t)
	for _, threads := range []string{"1", "2"} {
		code, out, errOut := runCLI(t, "run", "--model", path, "-p", "Once upon a time",
			"--temperature", "0", "--max-tokens", "200", "--no-cache", "--threads", threads)
		if code != exitOK {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		if !strings.HasPrefix(out, want) {
			t.Errorf("--threads %s: output\n%q\ndoes not begin with the golden text\n%q", threads, out, want)
		}
	}
}

// TestRunCache runs a long prompt twice with the store under --home: the
// second run restores the prompt's full blocks, prints the same text, and
// the store holds the pack.
func TestRunCache(t *testing.T) {
	path := stories(t)
	home := t.TempDir()
	prompt := storiesGolden(t)[:300]
	args := []string{"run", "--model", path, "-p", prompt, "--temperature", "0.7", "--seed", "9",
		"--max-tokens", "80", "--home", home, "-v"}
	cached := regexp.MustCompile(`(\d+) cached`)
	var outs []string
	var hits []int
	for range 2 {
		code, out, errOut := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		m := cached.FindStringSubmatch(errOut)
		if m == nil {
			t.Fatalf("-v output lacks the cached count: %q", errOut)
		}
		n, _ := strconv.Atoi(m[1])
		outs, hits = append(outs, out), append(hits, n)
	}
	if hits[0] != 0 || hits[1] < 64 {
		t.Errorf("cached tokens per run = %v, want 0 then at least one 64-token block", hits)
	}
	if outs[0] != outs[1] {
		t.Errorf("output with a restored prefix differs:\n%q\n%q", outs[0], outs[1])
	}
	code, out, errOut := runCLI(t, "pack", "ls", "--home", home, "--json")
	var packs []struct{ Tokens, Blocks int }
	if err := json.Unmarshal([]byte(out), &packs); code != exitOK || err != nil {
		t.Fatalf("pack ls --json: exit %d, %v, %q", code, err, errOut)
	}
	// The second run publishes prompt and output: the longest pack covers
	// at least the blocks it restored plus one more.
	longest := 0
	for _, p := range packs {
		longest = max(longest, p.Tokens)
	}
	if longest < hits[1]+64 {
		t.Errorf("longest pack covers %d tokens, want at least %d (restored prefix and a block of output)", longest, hits[1]+64)
	}
	code, out, errOut = runCLI(t, "pack", "verify", "--home", home)
	if code != exitOK {
		t.Errorf("pack verify after runs: exit %d, %q %q", code, out, errOut)
	}
}

func TestRunSeed(t *testing.T) {
	path := stories(t)
	args := []string{"run", "--model", path, "-p", "Once upon a time", "--temperature", "1", "--seed", "42", "--max-tokens", "50", "--no-cache"}
	_, a, _ := runCLI(t, args...)
	_, b, _ := runCLI(t, args...)
	if a != b || len(a) < 50 {
		t.Errorf("--seed 42 twice:\n%q\n%q", a, b)
	}
	_, c, _ := runCLI(t, append(args, "--stop", "the")...)
	if strings.Contains(strings.TrimPrefix(c, "Once upon a time"), "the") || !strings.HasPrefix(a, strings.TrimSuffix(c, "\n")) {
		t.Errorf("--stop the: %q is not the text before the first \"the\" of %q", c, a)
	}
}

func TestRunChat(t *testing.T) {
	path := stories(t)
	code, out, errOut := runCLI(t, "run", "--model", path, "-p", "Hello", "--chat", "--temperature", "0", "--max-tokens", "20", "--no-cache")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if strings.HasPrefix(out, "Hello") || strings.Contains(out, "<|im_start|>") || len(strings.TrimSpace(out)) == 0 {
		t.Errorf("--chat printed %q; want only the reply", out)
	}
}

func TestRunUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"run", "--model", "nonexistent.gguf", "-p", "hi", "--no-cache"}, exitNotFound, "nonexistent.gguf"},
		{[]string{"run", "--model", "x.gguf", "--kv", "q8", "--no-cache"}, exitUsage, "--kv"},
		{[]string{"run", "--model", "x.gguf", "extra", "--no-cache"}, exitUsage, "takes no arguments"},
	} {
		code, _, errOut := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errOut, c.code, c.msg)
		}
	}
	if code, _, errOut := runCLI(t, "run", "--model", stories(t), "-p", "hi", "--temperature", "-1", "--no-cache"); code != exitUsage || !strings.Contains(errOut, "temperature") {
		t.Errorf("--temperature -1: exit %d, %q", code, errOut)
	}
}

// TestRunDefaultModel: without --model the embedded default model answers
// held-out questions (graded as infer/defaultmodel/evalset grades them).
func TestRunDefaultModel(t *testing.T) {
	qs := evalset.Questions()
	for _, q := range qs[:3] {
		code, out, errOut := runCLI(t, "run", "-p", q.Prompt, "--chat", "--temperature", "0", "--max-tokens", "40", "--no-cache")
		if code != exitOK {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		if !strings.Contains(errOut, "embedded default model") {
			t.Errorf("stderr %q does not say the default model is used", errOut)
		}
		if !q.Check(out) {
			t.Errorf("%q: reply %q graded wrong (want %s)", q.Prompt, out, q.Want)
		}
	}
}

// TestDeviceFlag: --device takes cpu, cuda or cuda:N (anything else is a
// usage error), and a GPU that cannot be opened fails with exit status 1
// and an error naming the library tried; nothing is computed.
func TestDeviceFlag(t *testing.T) {
	t.Setenv("MUSER_LIBCUDA", filepath.Join(t.TempDir(), "libcuda.so.1"))
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"run", "--device", "gpu", "-p", "hi", "--no-cache"}, exitUsage, "--device"},
		{[]string{"run", "--device", "cuda:x", "-p", "hi", "--no-cache"}, exitUsage, "cuda:N"},
		{[]string{"bench", "--device", "tpu", "--model", "x.gguf"}, exitUsage, "--device"},
		{[]string{"run", "--device", "cuda", "-p", "hi", "--no-cache"}, exitFailure, "libcuda.so.1"},
		{[]string{"bench", "--device", "cuda:0", "--model", stories(t)}, exitFailure, "no CUDA driver"},
	} {
		code, out, errOut := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.msg) || (code == exitFailure && out != "") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d mentioning %q", c.args, code, out, errOut, c.code, c.msg)
		}
	}
	if code, out, errOut := runCLI(t, "run", "--device", "cpu", "--model", stories(t), "-p", "Once", "-n", "3", "--no-cache"); code != exitOK || !strings.HasPrefix(out, "Once") {
		t.Errorf("--device cpu: exit %d, %q, %q", code, out, errOut)
	}
}

// TestBenchReusesSequence: muser bench runs every repetition in one
// sequence (emptied before each, its cache sized for prompt+gen+8 tokens),
// and three repetitions decode the same tokens as a single run: nothing of
// one repetition leaks into the next.
func TestBenchReusesSequence(t *testing.T) {
	type result struct {
		PrefillTokS  float64 `json:"prefill_tok_s"`
		DecodeTokS   float64 `json:"decode_tok_s"`
		DecodeDigest string  `json:"decode_digest"`
		KVBytes      int64   `json:"kv_bytes"`
	}
	bench := func(reps string) result {
		code, out, errOut := runCLI(t, "bench", "--model", stories(t), "--prompt-tokens", "40", "--gen-tokens", "8", "--reps", reps, "--json")
		if code != exitOK {
			t.Fatalf("bench --reps %s: exit %d, %s", reps, code, errOut)
		}
		var r result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("bench --reps %s: %v in %q", reps, err, out)
		}
		return r
	}
	one, three := bench("1"), bench("3")
	if one.DecodeDigest == "" || one.DecodeDigest != three.DecodeDigest {
		t.Errorf("decode digests %q (1 run) and %q (3 runs in one sequence) differ", one.DecodeDigest, three.DecodeDigest)
	}
	// stories260K: 5 layers, 4 KV heads of 8 dims, f16 K and V.
	const rowBytes = 5 * 2 * 4 * 8 * 2
	if want := int64((40 + 8 + 8) * rowBytes); one.KVBytes != want || three.KVBytes != want {
		t.Errorf("kv_bytes %d and %d, want %d (prompt+gen+8 tokens)", one.KVBytes, three.KVBytes, want)
	}
	if one.PrefillTokS <= 0 || three.DecodeTokS <= 0 {
		t.Errorf("rates %+v %+v", one, three)
	}
}
