package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "v.json")
	if err := run("", filepath.Join(dir, "d.gguf"), "", 4, 3, 1, out); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var v vector
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if v.BlockSize != 4 || v.Vocab != 2048 || v.TargetHidden != 256 || len(v.Requests) != 3 {
		t.Fatalf("block %d, vocab %d, hidden %d, %d requests; want 4, 2048, 256, 3", v.BlockSize, v.Vocab, v.TargetHidden, len(v.Requests))
	}
	for i, r := range v.Requests {
		if len(r.Hidden) != 256 || len(r.Logits) != 3 || len(r.Tokens) != 3 {
			t.Fatalf("request %d: %d hidden, %d logit rows, %d tokens; want 256, 3, 3", i, len(r.Hidden), len(r.Logits), len(r.Tokens))
		}
		for j, l := range r.Logits {
			best := 0
			for k := range l {
				if l[k] > l[best] {
					best = k
				}
			}
			if int32(best) != r.Tokens[j] {
				t.Errorf("request %d position %d: argmax %d, token %d", i, j+1, best, r.Tokens[j])
			}
		}
	}
	if err := run("", "", "", 4, 3, 1, out); err == nil {
		t.Error("neither -drafter nor -random: got no error")
	}
	if err := run(filepath.Join(dir, "d.gguf"), "", "", 4, 3, 1, out); err != nil {
		t.Errorf("-drafter of the written file: %v", err)
	}
}
