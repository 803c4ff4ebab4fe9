package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/blockdraft/blockdrafttest"
	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/tokenizer"
)

// files writes the embedded default model, a random drafter for it (block
// size 4) and a short story into a temporary folder.
func files(t *testing.T) options {
	t.Helper()
	dir := t.TempDir()
	o := options{target: filepath.Join(dir, "target.gguf"), drafter: filepath.Join(dir, "draft.gguf"),
		text: filepath.Join(dir, "text.txt"), gen: 200, threads: 2, ban: true}
	if err := os.WriteFile(o.target, defaultmodel.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := blockdrafttest.WriteFor(o.drafter, o.target, blockdrafttest.Small()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(o.text, []byte("Once upon a time, there was a little girl named Lily. She liked to play in the park."), 0o644); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestRunReports(t *testing.T) {
	o := files(t)
	o.depths = []int{8, 16}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out, true); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&out)
	for _, depth := range o.depths {
		var r report
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if r.Depth != depth || r.Gen != o.gen {
			t.Fatalf("report for context %d, %d generated; want %d, %d", r.Depth, r.Gen, depth, o.gen)
		}
		if r.All.Drafts != o.gen-3 || len(r.All.Hits) != 3 {
			t.Fatalf("%d drafts of %d hits; want %d of 3", r.All.Drafts, len(r.All.Hits), o.gen-3)
		}
		if r.FirstEnd < 0 {
			t.Fatalf("context %d: the target would not have ended in %d tokens; the story should", depth, o.gen)
		}
		if r.Before.Drafts+r.After.Drafts != r.All.Drafts || r.Before.Drafts != max(r.FirstEnd-3, 0) {
			t.Errorf("before %d + after %d drafts, first end %d; want %d in all, %d before",
				r.Before.Drafts, r.After.Drafts, r.FirstEnd, r.All.Drafts, max(r.FirstEnd-3, 0))
		}
		for _, s := range []span{r.All, r.Before, r.After} {
			sum := 0.0
			for j, h := range s.Hits {
				if h < 0 || h > 1 || (j > 0 && h > s.Hits[j-1]) {
					t.Fatalf("hits %v: not a falling share", s.Hits)
				}
				sum += h
			}
			if math.Abs(sum-s.AcceptedPerDraft) > 1e-9 {
				t.Errorf("accepted a draft %v, the hits sum to %v", s.AcceptedPerDraft, sum)
			}
		}
	}
}

// TestDecodeBansEnds: banning the ends changes nothing before the first
// step whose favourite is an end, and that step's token.
func TestDecodeBansEnds(t *testing.T) {
	o := files(t)
	ctx := context.Background()
	m, err := engine.Open(o.target, engine.Options{Device: cpu.New(cpu.Options{Threads: 2})})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.FromGGUF(m.File().Meta)
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(o.text)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := tok.Encode(string(text), tokenizer.EncodeOptions{AddSpecial: true})
	if err != nil {
		t.Fatal(err)
	}
	free, err := decode(ctx, m, prompt, o.gen, nil)
	if err != nil {
		t.Fatal(err)
	}
	banned, err := decode(ctx, m, prompt, o.gen, tok.EOGs())
	if err != nil {
		t.Fatal(err)
	}
	if free.firstEnd != -1 {
		t.Fatalf("without bans the first end is %d, want -1", free.firstEnd)
	}
	e := -1
	for i, id := range free.chosen {
		if tok.IsEOG(id) {
			e = i
			break
		}
	}
	if e < 0 || banned.firstEnd != e {
		t.Fatalf("banned decoding's first end %d, the free decoding's first end token at %d", banned.firstEnd, e)
	}
	for i := 0; i < e; i++ {
		if banned.chosen[i] != free.chosen[i] {
			t.Fatalf("token %d: %d banned, %d free; want equal before the end", i, banned.chosen[i], free.chosen[i])
		}
	}
	if tok.IsEOG(banned.chosen[e]) {
		t.Errorf("banned decoding chose end token %d", banned.chosen[e])
	}
}

func TestRunRefuses(t *testing.T) {
	base := files(t)
	other := filepath.Join(t.TempDir(), "other.gguf")
	wide := blockdrafttest.Small()
	wide.TargetHidden = 96
	if err := blockdrafttest.WriteFor(other, base.target, wide); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		edit   func(o *options)
		want   string
		wantIs error
	}{
		{"text too short", func(o *options) { o.depths = []int{5000} }, "fewer than the context of 5000", nil},
		{"drafter for another target", func(o *options) { o.drafter = other }, "other.gguf", blockdraft.ErrTargetMismatch},
		{"one token generated", func(o *options) { o.gen = 1 }, "-gen 1", nil},
		{"missing text", func(o *options) { o.text = filepath.Join(t.TempDir(), "none.txt") }, "none.txt", os.ErrNotExist},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := base
			o.depths = []int{8}
			c.edit(&o)
			err := run(context.Background(), o, &bytes.Buffer{}, false)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming %q", err, c.want)
			}
			if c.wantIs != nil && !errors.Is(err, c.wantIs) {
				t.Errorf("err = %v, want one wrapping %v", err, c.wantIs)
			}
		})
	}
}
