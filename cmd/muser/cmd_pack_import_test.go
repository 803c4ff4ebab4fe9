package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/store"
)

// TestPackImportExpectModel: a pack that muser run made with stories260K
// imports under --expect-model stories260K, and is refused, with a receipt
// naming the differing fields, under a KV type or a model it was not made
// with. A model whose file is missing, or a bad --kv, fails before the
// store is created.
func TestPackImportExpectModel(t *testing.T) {
	model := stories(t)
	home := filepath.Join(t.TempDir(), "home")
	if code, _, errs := muser(t, home, "run", "--model", model, "-p", "Once upon a time", "--temperature", "0", "--max-tokens", "100"); code != exitOK {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	code, out, errs := muser(t, home, "pack", "ls", "--json")
	var packs []store.PackInfo
	if code != exitOK || json.Unmarshal([]byte(out), &packs) != nil || len(packs) == 0 {
		t.Fatalf("pack ls: exit %d, %d packs, stderr %q", code, len(packs), errs)
	}
	file := filepath.Join(t.TempDir(), "p.kvpack")
	if code, _, errs := muser(t, home, "pack", "export", packs[0].ID.String(), "-o", file); code != exitOK {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	tiny := filepath.Join(t.TempDir(), "tiny-llama.gguf")
	if err := enginetest.WriteFile(tiny, enginetest.Tiny("llama"), ggml.TypeQ8_0, 1); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(home, "seal.key")
	tests := []struct {
		name   string
		args   []string
		code   int
		fields []string // fields the refusal names
		store  bool     // whether the destination store exists afterwards
	}{
		{"same model", []string{"--expect-model", model}, exitOK, nil, true},
		{"other KV type", []string{"--expect-model", model, "--kv", "f32"}, exitRefused, []string{"kv"}, true},
		{"other model", []string{"--expect-model", tiny}, exitRefused, []string{"model", "arch", "tokenizer", "quant"}, true},
		{"missing model file", []string{"--expect-model", filepath.Join(t.TempDir(), "none.gguf")}, exitNotFound, nil, false},
		{"bad --kv", []string{"--expect-model", model, "--kv", "q8"}, exitUsage, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "dst")
			args := append([]string{"pack", "import", file, "--key", key}, tc.args...)
			code, out, errs := muser(t, dst, args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out, errs)
			}
			_, statErr := os.Stat(dst)
			if exists := statErr == nil; exists != tc.store {
				t.Fatalf("destination store exists: %v, want %v", exists, tc.store)
			}
			switch tc.code {
			case exitOK:
				if !strings.Contains(out, "imported pack "+packs[0].ID.String()) {
					t.Fatalf("stdout %q", out)
				}
				if code, out, _ := muser(t, dst, "pack", "verify"); code != exitOK || out != "OK\n" {
					t.Fatalf("verify after import: exit %d %q", code, out)
				}
			case exitRefused:
				if !strings.Contains(errs, "identity-mismatch") {
					t.Fatalf("stderr %q does not say identity-mismatch", errs)
				}
				code, out, _ := muser(t, dst, "receipts", "ls", "--json")
				var rs []struct {
					Reason string `json:"reason"`
					Fields []struct {
						Field string `json:"field"`
					} `json:"fields"`
				}
				if code != exitOK || json.Unmarshal([]byte(out), &rs) != nil || len(rs) != 1 {
					t.Fatalf("receipts ls: exit %d, want one receipt:\n%s", code, out)
				}
				var named []string
				for _, f := range rs[0].Fields {
					named = append(named, f.Field)
				}
				if rs[0].Reason != "identity-mismatch" || !slices.Equal(named, tc.fields) {
					t.Errorf("receipt: reason %q naming %v; want identity-mismatch naming %v", rs[0].Reason, named, tc.fields)
				}
				if code, out, _ := muser(t, dst, "pack", "ls"); code != exitOK || strings.Contains(out, packs[0].ID.String()[:12]) {
					t.Errorf("refused pack listed: exit %d\n%s", code, out)
				}
			}
		})
	}
}
