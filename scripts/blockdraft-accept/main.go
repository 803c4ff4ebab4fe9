// Command blockdraft-accept measures how well a block drafter
// (docs/blockdraft.md) drafts for its target after a text: the target
// decodes greedily from the text's first tokens, and at every step the
// drafter drafts a whole block from the target's hidden state and the token
// it chose; each draft is compared with the target's next greedy tokens.
// It reports, per context length, the share of drafts whose first j tokens
// all hold (j = 1 … block size − 1) and the tokens a draft would have had
// accepted on average, the measure the training recipe reports.
//
// With -ban (the default) the target's end-of-generation tokens are banned,
// as `muser bench` decodes, and the report also splits the drafts before
// and after the first step where the target would have ended (its
// favourite token was an end): from there on the target writes text a
// drafter trained on the corpus alone has not seen.
//
//	go run ./scripts/blockdraft-accept -target long-q4_k.gguf -drafter block.gguf \
//	    -text stories-8192.txt -depths 256,2048,4096 -gen 384
//
// The target and the drafter compute on the CPU with -threads workers
// (0: one per CPU). One line per context length, or one JSON object per
// line with -json. Exit status 1 on any error, which names the file at
// fault.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/tokenizer"
)

// endBias is what `muser bench` adds to an end-of-generation token's logit.
const endBias = -100

// options are the command's flags.
type options struct {
	target, drafter, text string
	depths                []int
	gen, threads          int
	ban                   bool
}

// span is the drafts of a part of the decoding.
type span struct {
	Drafts int `json:"drafts"`
	// AcceptedPerDraft is the mean number of leading draft tokens equal to
	// the target's greedy tokens.
	AcceptedPerDraft float64 `json:"accepted_per_draft"`
	// Hits[j] is the share of drafts whose first j+1 tokens all hold.
	Hits []float64 `json:"hits"`
}

// report is one context length's result.
type report struct {
	Depth int `json:"depth"`
	Gen   int `json:"gen"`
	// FirstEnd is the generated token at which the target would first
	// have ended, -1 when it would not have (or with -ban=false).
	FirstEnd int  `json:"first_end"`
	All      span `json:"all"`
	// Before holds the drafts whose tokens all come before FirstEnd,
	// After the others; both are empty without an end.
	Before span `json:"before_end"`
	After  span `json:"after_end"`
}

func main() {
	var o options
	var depths string
	var asJSON bool
	flag.StringVar(&o.target, "target", "", "the target GGUF (required)")
	flag.StringVar(&o.drafter, "drafter", "", "the block drafter GGUF trained for it (required)")
	flag.StringVar(&o.text, "text", "", "the text whose first tokens are the context (required)")
	flag.StringVar(&depths, "depths", "256,2048", "context lengths in tokens, comma-separated")
	flag.IntVar(&o.gen, "gen", 384, "tokens the target decodes after each context")
	flag.IntVar(&o.threads, "threads", 0, "CPU workers (0: one per CPU)")
	flag.BoolVar(&o.ban, "ban", true, "ban the target's end-of-generation tokens, as muser bench does")
	flag.BoolVar(&asJSON, "json", false, "one JSON object per context length")
	flag.Parse()
	err := parseDepths(depths, &o)
	if err == nil {
		err = run(context.Background(), o, os.Stdout, asJSON)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "blockdraft-accept:", err)
		os.Exit(1)
	}
}

func parseDepths(s string, o *options) error {
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-depths: %q is not a positive token count", f)
		}
		o.depths = append(o.depths, n)
	}
	return nil
}

// run measures every depth of o and writes the reports to w.
func run(ctx context.Context, o options, w io.Writer, asJSON bool) error {
	if o.target == "" || o.drafter == "" || o.text == "" {
		return errors.New("-target, -drafter and -text are required")
	}
	if o.gen < 2 {
		return fmt.Errorf("-gen %d: want at least 2", o.gen)
	}
	m, err := engine.Open(o.target, engine.Options{Device: cpu.New(cpu.Options{Threads: o.threads})})
	if err != nil {
		return err
	}
	defer m.Close()
	d, err := blockdraft.Open(o.drafter, o.threads)
	if err != nil {
		return err
	}
	defer d.Close()
	cfg := m.Config()
	if err := d.CheckTarget(cfg.Hidden, cfg.Vocab); err != nil {
		return fmt.Errorf("%s: %w", o.drafter, err)
	}
	tok, err := tokenizer.FromGGUF(m.File().Meta)
	if err != nil {
		return fmt.Errorf("%s: %w", o.target, err)
	}
	data, err := os.ReadFile(o.text)
	if err != nil {
		return err
	}
	ids, err := tok.Encode(string(data), tokenizer.EncodeOptions{AddSpecial: true})
	if err != nil {
		return fmt.Errorf("%s: %w", o.text, err)
	}
	var ends []int32
	if o.ban {
		ends = tok.EOGs()
	}
	enc := json.NewEncoder(w)
	for _, depth := range o.depths {
		if depth > len(ids) {
			return fmt.Errorf("%s: %d tokens, fewer than the context of %d", o.text, len(ids), depth)
		}
		dec, err := decode(ctx, m, ids[:depth], o.gen, ends)
		if err != nil {
			return fmt.Errorf("%s after %d tokens of %s: %w", o.target, depth, o.text, err)
		}
		r, err := measure(ctx, d, dec)
		if err != nil {
			return fmt.Errorf("%s: %w", o.drafter, err)
		}
		r.Depth, r.Gen = depth, o.gen
		if asJSON {
			if err := enc.Encode(r); err != nil {
				return err
			}
			continue
		}
		if _, err := fmt.Fprintln(w, r.String()); err != nil {
			return err
		}
	}
	return nil
}

// decoding is the target's greedy decoding after a context.
type decoding struct {
	// chosen[i] is the i-th generated token; hidden[i] the target's
	// final-normed hidden state from which it was chosen (after the
	// token before it).
	chosen []int32
	hidden [][]float32
	// firstEnd is the first i at which the favourite token was a banned
	// end, -1 when none was.
	firstEnd int
}

// decode runs the target greedily for gen tokens after prompt, with the
// logits of ends lowered by endBias.
func decode(ctx context.Context, m *engine.Model, prompt []int32, gen int, ends []int32) (*decoding, error) {
	seq, err := m.NewSequence(len(prompt) + gen)
	if err != nil {
		return nil, err
	}
	defer seq.Close()
	H := m.Config().Hidden
	dec := &decoding{firstEnd: -1}
	st := []engine.Step{{Seq: seq, Tokens: prompt, Output: engine.OutputLast, Hidden: engine.OutputLast}}
	for i := 0; i < gen; i++ {
		if err := m.Forward(ctx, st); err != nil {
			return nil, err
		}
		lg := st[0].Logits
		fav := blockdraft.Argmax(lg)
		for _, e := range ends {
			lg[e] += endBias
		}
		next := blockdraft.Argmax(lg)
		if next != fav && dec.firstEnd < 0 {
			dec.firstEnd = i
		}
		dec.chosen = append(dec.chosen, next)
		dec.hidden = append(dec.hidden, append([]float32(nil), st[0].HiddenStates[:H]...))
		st[0].Tokens = []int32{next}
	}
	return dec, nil
}

// drafts per Draft call.
const chunk = 64

// measure drafts a full block at every step of dec that has a block of
// greedy tokens after it and compares.
func measure(ctx context.Context, d *blockdraft.Model, dec *decoding) (report, error) {
	K := d.BlockSize() - 1
	n := len(dec.chosen) - K
	r := report{FirstEnd: dec.firstEnd}
	if n < 1 {
		return r, fmt.Errorf("%d generated tokens leave no step with %d greedy tokens after it", len(dec.chosen), K)
	}
	var all, before, after tally
	reqs := make([]blockdraft.Request, 0, chunk)
	for lo := 0; lo < n; lo += chunk {
		reqs = reqs[:0]
		for i := lo; i < min(lo+chunk, n); i++ {
			reqs = append(reqs, blockdraft.Request{Hidden: dec.hidden[i], Anchor: dec.chosen[i], Max: K})
		}
		if err := d.Draft(ctx, reqs); err != nil {
			return r, err
		}
		for j, q := range reqs {
			i := lo + j
			run := 0
			for run < K && q.Tokens[run] == dec.chosen[i+1+run] {
				run++
			}
			all.add(run, K)
			if dec.firstEnd < 0 || i+K < dec.firstEnd {
				before.add(run, K)
			} else {
				after.add(run, K)
			}
		}
	}
	r.All = all.span()
	if dec.firstEnd >= 0 {
		r.Before, r.After = before.span(), after.span()
	}
	return r, nil
}

// tally counts drafts by how many leading tokens held.
type tally struct {
	held []int // held[j]: drafts whose first j+1 tokens held
	n    int
}

func (t *tally) add(run, K int) {
	if t.held == nil {
		t.held = make([]int, K)
	}
	for j := 0; j < run; j++ {
		t.held[j]++
	}
	t.n++
}

func (t *tally) span() span {
	s := span{Drafts: t.n, Hits: make([]float64, len(t.held))}
	if t.n == 0 {
		return s
	}
	for j, h := range t.held {
		s.Hits[j] = float64(h) / float64(t.n)
		s.AcceptedPerDraft += s.Hits[j]
	}
	return s
}

func (s span) String() string {
	hits := make([]string, len(s.Hits))
	for j, h := range s.Hits {
		hits[j] = strconv.FormatFloat(h, 'f', 2, 64)
	}
	return fmt.Sprintf("%d drafts, %.2f accepted a draft, hits [%s]", s.Drafts, s.AcceptedPerDraft, strings.Join(hits, " "))
}

func (r report) String() string {
	s := fmt.Sprintf("context %d, %d generated: %s", r.Depth, r.Gen, r.All)
	if r.FirstEnd < 0 {
		return s + "; the target would not have ended"
	}
	return s + fmt.Sprintf("; it would have ended at generated token %d: before, %s; after, %s", r.FirstEnd, r.Before, r.After)
}
