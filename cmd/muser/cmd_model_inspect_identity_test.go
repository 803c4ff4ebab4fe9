package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/kvcache"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/serve/adminapi"
	"github.com/muserhq/muser/store"
)

// inspectIdentityJSON runs `muser model inspect --json` with args and
// returns the identity it reports.
func inspectIdentityJSON(t *testing.T, args ...string) inspectIdentity {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"model", "inspect", "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("model inspect %v: exit %d, stderr %q", args, code, errOut)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("model inspect %v: output is not JSON: %v", args, err)
	}
	return rep.Identity
}

// engineIdentity computes the identity of path as serve and run do.
func engineIdentity(t *testing.T, path string, kv kvcache.DType, block int) pack.Identity {
	t.Helper()
	m, err := engine.Open(path, engine.Options{Device: cpu.New(cpu.Options{Threads: 1}), KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	id, err := m.Identity(block)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// identityDiff lists the fields where the inspected identity differs from
// the engine's id, in pack inspect's spelling.
func identityDiff(got inspectIdentity, id pack.Identity) []string {
	var diffs []string
	check := func(field, g, w string) {
		if g != w {
			diffs = append(diffs, field+": got "+g+", want "+w)
		}
	}
	check("key", got.Key, id.Key().String())
	if got.Format != id.Format {
		diffs = append(diffs, "format differs")
	}
	check("model", got.Model, id.Model.String())
	check("arch", got.Arch, id.Arch)
	check("tokenizer", got.Tokenizer, id.Tokenizer.String())
	check("template", got.Template, id.Template.String())
	check("quant", got.Quant, id.Quant)
	check("kv", got.KV, id.KV)
	check("engine", got.Engine, id.Engine)
	if len(got.Missing) != 0 {
		diffs = append(diffs, "missing fields reported")
	}
	return diffs
}

// TestModelInspectIdentityEqualsEngine checks that the eight fields model
// inspect prints are the ones the engine computes for the same file.
func TestModelInspectIdentityEqualsEngine(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"stories260K": stories(t)}
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		p := filepath.Join(dir, arch+".gguf")
		if err := enginetest.WriteFile(p, enginetest.Tiny(arch), ggml.TypeQ8_0, 1); err != nil {
			t.Fatal(err)
		}
		files["tiny-"+arch] = p
	}
	home := t.TempDir() // no store: the default block size
	tests := []struct {
		name string
		args []string
		kv   kvcache.DType
		blk  int
	}{
		{"stories260K", nil, kvcache.DTypeF16, store.DefaultBlockTokens},
		{"stories260K", []string{"--kv", "f32"}, kvcache.DTypeF32, store.DefaultBlockTokens},
		{"stories260K", []string{"--block-tokens", "16"}, kvcache.DTypeF16, 16},
		{"tiny-llama", nil, kvcache.DTypeF16, store.DefaultBlockTokens},
		{"tiny-qwen2", []string{"--kv", "f32"}, kvcache.DTypeF32, store.DefaultBlockTokens},
		{"tiny-qwen3", nil, kvcache.DTypeF16, store.DefaultBlockTokens},
	}
	for _, tc := range tests {
		t.Run(tc.name+strings.Join(tc.args, ""), func(t *testing.T) {
			path := files[tc.name]
			got := inspectIdentityJSON(t, append([]string{"--home", home, path}, tc.args...)...)
			want := engineIdentity(t, path, tc.kv, tc.blk)
			for _, d := range identityDiff(got, want) {
				t.Error(d)
			}
			if got.BlockTokens != tc.blk {
				t.Errorf("block tokens: got %d, want %d", got.BlockTokens, tc.blk)
			}
		})
	}
}

// TestModelInspectIdentityUnsupported checks that a file the engine cannot
// load still gets its GGUF-derived fields, with the others listed and the
// reason given, and exit status 0.
func TestModelInspectIdentityUnsupported(t *testing.T) {
	dir := t.TempDir()
	b := gguf.NewBuilder()
	b.SetString("general.architecture", "gpt2")
	b.AddFloat32("w", ggml.TypeQ8_0, []int64{32, 2}, make([]float32, 64))
	path := filepath.Join(dir, "gpt2.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	got := inspectIdentityJSON(t, "--home", dir, path)
	if got.Key != "" || got.Arch != "" || got.KV != "" || got.Engine != "" || got.Tokenizer != "" {
		t.Errorf("got key %q arch %q kv %q engine %q tokenizer %q; want all empty", got.Key, got.Arch, got.KV, got.Engine, got.Tokenizer)
	}
	if got.Model == "" || got.Quant != "Q8_0" || got.Template == "" || got.Format != pack.FormatVersion {
		t.Errorf("GGUF-derived fields: got %+v", got)
	}
	var fields []string
	for _, m := range got.Missing {
		fields = append(fields, m.Field)
		if m.Field == "arch" && !strings.Contains(m.Reason, `"gpt2" is not supported`) {
			t.Errorf("arch reason %q does not name the architecture", m.Reason)
		}
	}
	if f := strings.Join(fields, ","); f != "tokenizer,arch,kv,engine" {
		t.Errorf("missing fields: got %s, want tokenizer,arch,kv,engine", f)
	}
	code, out, errOut := runCLI(t, "model", "inspect", "--home", dir, path)
	if code != exitOK {
		t.Fatalf("text: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"identity     (incomplete: 4 of 8 fields could not be computed)",
		"arch not computed: the engine cannot load this model", "  quant      \"Q8_0\""} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	if code, _, errOut := runCLI(t, "model", "inspect", "--kv", "q8", path); code != exitUsage || !strings.Contains(errOut, "--kv") {
		t.Errorf("--kv q8: exit %d, stderr %q; want %d naming --kv", code, errOut, exitUsage)
	}
}

// TestModelInspectIdentityMatchesServedPacks serves a request with
// stories260K and checks that the packs it publishes carry, per pack
// inspect, the identity model inspect prints for the file and store.
func TestModelInspectIdentityMatchesServedPacks(t *testing.T) {
	path := stories(t)
	home := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := serveCLI(t, ctx, path, home)
	prompt := strings.Repeat("Once upon a time, there was a little girl named Lily. She liked to play outside. ", 6)
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 2})
	resp, err := http.Post(srv.url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("completion: got %d, want 200", resp.StatusCode)
	}
	cancel()
	if c := <-srv.code; c != exitOK {
		t.Fatalf("serve exit %d (stderr %s)", c, srv.stderr.String())
	}

	c, out, errOut := runCLI(t, "pack", "ls", "--json", "--home", home)
	if c != exitOK {
		t.Fatalf("pack ls: exit %d, stderr %q", c, errOut)
	}
	var packs []store.PackInfo
	if err := json.Unmarshal([]byte(out), &packs); err != nil {
		t.Fatalf("pack ls --json: %v\n%s", err, out)
	}
	if len(packs) == 0 {
		t.Fatal("serving a prompt of several blocks published no pack")
	}
	want := inspectIdentityJSON(t, "--home", home, path)
	if want.BlockFrom != "the store under "+home {
		t.Errorf("block size from %q, want the store's", want.BlockFrom)
	}
	for _, p := range packs {
		c, out, errOut := runCLI(t, "pack", "inspect", "--json", "--home", home, p.ID.String())
		if c != exitOK {
			t.Fatalf("pack inspect: exit %d, stderr %q", c, errOut)
		}
		var pi adminapi.Inspect
		if err := json.Unmarshal([]byte(out), &pi); err != nil {
			t.Fatalf("pack inspect --json: %v", err)
		}
		m := pi.Manifest.Identity
		got := pack.Identity{Format: m.Format, Model: m.Model, Arch: m.Arch, Tokenizer: m.Tokenizer, Template: m.Template,
			Quant: m.Quant, KV: m.KV, Engine: m.Engine}
		if got.Key() != m.Key {
			t.Errorf("pack %s: key %s does not match its fields", p.ID, m.Key)
		}
		for _, d := range identityDiff(want, got) {
			t.Errorf("pack %s: model inspect vs pack inspect: %s", p.ID, d)
		}
	}
}
