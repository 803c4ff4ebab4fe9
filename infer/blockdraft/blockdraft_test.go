package blockdraft_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/blockdraft/blockdrafttest"
	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/tokenizer"
)

// targetPath is the shared test model (hidden 64, vocabulary 512).
const targetPath = "../../../shared/models/stories260K.gguf"

// openTarget opens the shared test model's GGUF file.
func openTarget(t testing.TB) *gguf.File {
	t.Helper()
	f, err := gguf.Open(targetPath)
	if err != nil {
		t.Fatalf("open the target: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// writeDrafter writes a random drafter for target and returns its path.
func writeDrafter(t testing.TB, target *gguf.File, o blockdrafttest.Options) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "drafter.gguf")
	if err := blockdrafttest.WriteFile(path, target, o); err != nil {
		t.Fatalf("write drafter: %v", err)
	}
	return path
}

// openDrafter writes and opens a random drafter for target.
func openDrafter(t testing.TB, target *gguf.File, o blockdrafttest.Options, threads int) *blockdraft.Model {
	t.Helper()
	m, err := blockdraft.Open(writeDrafter(t, target, o), threads)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// randomRequests returns n requests of random hidden states (unit normal)
// and anchors, asking for every token of a block.
func randomRequests(m *blockdraft.Model, n int, seed uint64) []blockdraft.Request {
	r := rand.New(rand.NewPCG(seed, 7))
	reqs := make([]blockdraft.Request, n)
	for i := range reqs {
		h := make([]float32, m.TargetHidden())
		for j := range h {
			h[j] = float32(r.NormFloat64())
		}
		reqs[i] = blockdraft.Request{Hidden: h, Anchor: int32(r.IntN(m.Vocab())), Max: m.BlockSize() - 1}
	}
	return reqs
}

// clone copies requests with fresh Tokens.
func clone(reqs []blockdraft.Request) []blockdraft.Request {
	out := slices.Clone(reqs)
	for i := range out {
		out[i].Tokens = nil
	}
	return out
}

func TestDraftMatchesReference(t *testing.T) {
	target := openTarget(t)
	cases := []struct {
		name string
		o    blockdrafttest.Options
	}{
		{"D32 L1 heads 2/1 B4", blockdrafttest.Options{Hidden: 32, Layers: 1, Heads: 2, KVHeads: 1, FFN: 64, Block: 4, Seed: 3}},
		{"D64 L2 heads 4/2 B8", blockdrafttest.Options{Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 96, Block: 8, Seed: 4}},
		{"D64 L1 heads 4/4 B2", blockdrafttest.Options{Hidden: 64, Layers: 1, Heads: 4, KVHeads: 4, FFN: 64, Block: 2, Seed: 5}},
		{"D96 L3 heads 6/3 B16", blockdrafttest.Options{Hidden: 96, Layers: 3, Heads: 6, KVHeads: 3, FFN: 160, Block: 16, Seed: 6}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Type = ggml.TypeF32
			path := writeDrafter(t, target, tc.o)
			m, err := blockdraft.Open(path, 2)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer m.Close()
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ref := newRef(t, f, m.Config())
			compared, total := 0, 0
			for i, req := range randomRequests(m, 6, uint64(i0(tc.o.Seed))) {
				rs := []blockdraft.Request{req}
				if err := m.Draft(context.Background(), rs); err != nil {
					t.Fatalf("Draft: %v", err)
				}
				req = rs[0]
				lg, err := m.Logits(context.Background(), rs)
				if err != nil {
					t.Fatalf("Logits: %v", err)
				}
				got := lg[0]
				want := ref.forward(req.Hidden, req.Anchor)
				if len(got) != len(want) || len(req.Tokens) != len(want) {
					t.Fatalf("request %d: %d logit rows and %d tokens, want %d", i, len(got), len(req.Tokens), len(want))
				}
				for j := range want {
					for v := range want[j] {
						if d := math.Abs(float64(got[j][v]) - want[j][v]); d > 1e-4+1e-4*math.Abs(want[j][v]) {
							t.Fatalf("request %d position %d token %d: logit %v, reference %v (off by %g)", i, j+1, v, got[j][v], want[j][v], d)
						}
					}
					tok, margin := top2(want[j])
					total++
					if margin < 1e-3 {
						continue // too close to call in float32
					}
					compared++
					if req.Tokens[j] != tok {
						t.Errorf("request %d position %d: token %d, reference %d (margin %g)", i, j+1, req.Tokens[j], tok, margin)
					}
				}
			}
			if compared < total*3/4 {
				t.Errorf("only %d of %d tokens had a clear margin: the test compares too little", compared, total)
			}
		})
	}
}

func i0(s uint64) uint64 { return s*31 + 1 }

// TestDraftInvariance checks that a request's tokens (and logits, bit for
// bit) do not depend on the other requests of the call, their order, or
// the thread count.
func TestDraftInvariance(t *testing.T) {
	target := openTarget(t)
	for _, typ := range []ggml.Type{ggml.TypeF32, ggml.TypeQ8_0} {
		t.Run(typ.String(), func(t *testing.T) {
			o := blockdrafttest.Options{Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 128, Block: 6, Seed: 9, Type: typ}
			path := writeDrafter(t, target, o)
			one, err := blockdraft.Open(path, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			three, err := blockdraft.Open(path, 3)
			if err != nil {
				t.Fatal(err)
			}
			defer three.Close()
			reqs := randomRequests(one, 7, 11)
			// Alone, on one thread.
			var alone [][]int32
			var aloneLogits [][][]float32
			for _, r := range clone(reqs) {
				rs := []blockdraft.Request{r}
				if err := one.Draft(context.Background(), rs); err != nil {
					t.Fatal(err)
				}
				alone = append(alone, rs[0].Tokens)
				lg, err := one.Logits(context.Background(), rs)
				if err != nil {
					t.Fatal(err)
				}
				aloneLogits = append(aloneLogits, lg[0])
			}
			distinct := map[int32]bool{}
			for _, toks := range alone {
				for _, tok := range toks {
					distinct[tok] = true
				}
			}
			if len(distinct) < 3 {
				t.Fatalf("the drafts use %d distinct tokens: too uniform to test anything", len(distinct))
			}
			// Together, on one and three threads, in order and reversed.
			for _, m := range []*blockdraft.Model{one, three} {
				for _, reverse := range []bool{false, true} {
					batch := clone(reqs)
					if reverse {
						slices.Reverse(batch)
					}
					if err := m.Draft(context.Background(), batch); err != nil {
						t.Fatal(err)
					}
					logits, err := m.Logits(context.Background(), batch)
					if err != nil {
						t.Fatal(err)
					}
					if reverse {
						slices.Reverse(batch)
					}
					for i := range batch {
						if !slices.Equal(batch[i].Tokens, alone[i]) {
							t.Errorf("%d threads, reversed %v: request %d drafts %v, alone %v", m.Threads(), reverse, i, batch[i].Tokens, alone[i])
						}
						pos := i
						if reverse {
							pos = len(batch) - 1 - i
						}
						for j, want := range aloneLogits[i] {
							got := logits[pos][j]
							for v := range want {
								if math.Float32bits(got[v]) != math.Float32bits(want[v]) {
									t.Fatalf("%d threads, reversed %v: request %d position %d token %d: logit %v in the batch, %v alone",
										m.Threads(), reverse, i, j+1, v, got[v], want[v])
								}
							}
						}
					}
				}
			}
		})
	}
}

func TestDraftMaxAndTokens(t *testing.T) {
	target := openTarget(t)
	m := openDrafter(t, target, blockdrafttest.Options{Block: 5, Seed: 2}, 2)
	full := randomRequests(m, 1, 5)
	if err := m.Draft(context.Background(), full); err != nil {
		t.Fatal(err)
	}
	if len(full[0].Tokens) != 4 {
		t.Fatalf("Max 4: got %d tokens, want 4", len(full[0].Tokens))
	}
	for _, tc := range []struct {
		max, want int
	}{{1, 1}, {2, 2}, {4, 4}, {5, 4}, {1000, 4}} {
		buf := make([]int32, 3, 16)
		buf[0], buf[1], buf[2] = -1, -1, -1
		r := full[0]
		r.Max, r.Tokens = tc.max, buf
		rs := []blockdraft.Request{r}
		if err := m.Draft(context.Background(), rs); err != nil {
			t.Fatalf("Max %d: %v", tc.max, err)
		}
		got := rs[0].Tokens
		if len(got) != tc.want {
			t.Errorf("Max %d: got %d tokens, want %d", tc.max, len(got), tc.want)
		}
		if !slices.Equal(got, full[0].Tokens[:tc.want]) {
			t.Errorf("Max %d: got %v, want the full draft's first %d, %v", tc.max, got, tc.want, full[0].Tokens[:tc.want])
		}
		if &got[0] != &buf[0] {
			t.Errorf("Max %d: Tokens was reallocated, want its capacity reused", tc.max)
		}
	}
}

func TestDraftBadRequests(t *testing.T) {
	target := openTarget(t)
	m := openDrafter(t, target, blockdrafttest.Small(), 1)
	cases := []struct {
		name  string
		field string
		bad   func(r *blockdraft.Request)
	}{
		{"hidden short", "Hidden", func(r *blockdraft.Request) { r.Hidden = r.Hidden[:len(r.Hidden)-1] }},
		{"hidden long", "Hidden", func(r *blockdraft.Request) { r.Hidden = append(r.Hidden, 0) }},
		{"hidden nil", "Hidden", func(r *blockdraft.Request) { r.Hidden = nil }},
		{"anchor negative", "Anchor", func(r *blockdraft.Request) { r.Anchor = -1 }},
		{"anchor past the vocabulary", "Anchor", func(r *blockdraft.Request) { r.Anchor = int32(m.Vocab()) }},
		{"max zero", "Max", func(r *blockdraft.Request) { r.Max = 0 }},
		{"max negative", "Max", func(r *blockdraft.Request) { r.Max = -3 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reqs := randomRequests(m, 3, 1)
			reqs[0].Tokens = []int32{42}
			tc.bad(&reqs[2])
			err := m.Draft(context.Background(), reqs)
			var re *blockdraft.RequestError
			if !errors.As(err, &re) || !errors.Is(err, blockdraft.ErrRequest) {
				t.Fatalf("got %v, want a *RequestError matching ErrRequest", err)
			}
			if re.Index != 2 || re.Field != tc.field {
				t.Errorf("got index %d field %s, want index 2 field %s (%v)", re.Index, re.Field, tc.field, err)
			}
			if !slices.Equal(reqs[0].Tokens, []int32{42}) {
				t.Errorf("a refused call wrote request 0's tokens: %v", reqs[0].Tokens)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := m.Draft(ctx, randomRequests(m, 1, 1)); !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		c := openDrafter(t, target, blockdrafttest.Small(), 1)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := c.Draft(context.Background(), randomRequests(c, 1, 1)); !errors.Is(err, blockdraft.ErrClosed) {
			t.Errorf("got %v, want ErrClosed", err)
		}
	})
	t.Run("empty", func(t *testing.T) {
		if err := m.Draft(context.Background(), nil); err != nil {
			t.Errorf("no requests: got %v, want nil", err)
		}
	})
}

// TestTargets makes drafters for the embedded default model and the
// shared test model and checks what they record of their targets.
func TestTargets(t *testing.T) {
	def, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	defer def.Close()
	for _, tc := range []struct {
		name   string
		target *gguf.File
	}{{"default model", def}, {"stories260K", openTarget(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			o := blockdrafttest.Spec()
			o.Hidden, o.Layers, o.FFN, o.TargetHidden = 64, 1, 128, 0
			m := openDrafter(t, tc.target, o, 2)
			hidden, err := blockdrafttest.TargetHidden(tc.target)
			if err != nil {
				t.Fatal(err)
			}
			ttok, err := tokenizer.FromGGUF(tc.target.Meta)
			if err != nil {
				t.Fatal(err)
			}
			dtok, err := tokenizer.FromGGUF(m.File().Meta)
			if err != nil {
				t.Fatalf("the drafter's tokenizer: %v", err)
			}
			if dtok.VocabSize() != ttok.VocabSize() || m.Vocab() != ttok.VocabSize() {
				t.Fatalf("vocabulary: drafter tokenizer %d, Vocab() %d, want %d", dtok.VocabSize(), m.Vocab(), ttok.VocabSize())
			}
			for id := range int32(ttok.VocabSize()) {
				if dtok.Token(id) != ttok.Token(id) {
					t.Fatalf("token %d: %q in the drafter, %q in the target", id, dtok.Token(id), ttok.Token(id))
				}
			}
			if m.TargetHidden() != hidden || m.BlockSize() != 8 {
				t.Errorf("TargetHidden %d, BlockSize %d; want %d, 8", m.TargetHidden(), m.BlockSize(), hidden)
			}
			name, _ := tc.target.Meta.String("general.name")
			if m.TargetName() != name {
				t.Errorf("TargetName %q, want %q", m.TargetName(), name)
			}
			if err := m.CheckTarget(hidden, ttok.VocabSize()); err != nil {
				t.Errorf("CheckTarget of its own target: %v", err)
			}
			for _, bad := range []struct {
				hidden, vocab int
				field         string
			}{{hidden + 1, ttok.VocabSize(), "hidden size"}, {hidden, ttok.VocabSize() - 1, "vocabulary size"}} {
				err := m.CheckTarget(bad.hidden, bad.vocab)
				var me *blockdraft.TargetMismatchError
				if !errors.As(err, &me) || !errors.Is(err, blockdraft.ErrTargetMismatch) || me.Field != bad.field {
					t.Errorf("CheckTarget(%d, %d): got %v, want a *TargetMismatchError on %s", bad.hidden, bad.vocab, err, bad.field)
				}
			}
			reqs := randomRequests(m, 2, 3)
			if err := m.Draft(context.Background(), reqs); err != nil {
				t.Fatal(err)
			}
			for i, r := range reqs {
				if len(r.Tokens) != 7 {
					t.Errorf("request %d: %d tokens, want 7", i, len(r.Tokens))
				}
			}
		})
	}
}

// TestDraftConcurrent drafts from several goroutines on one Model: the
// calls take turns and each gets the tokens it gets alone.
func TestDraftConcurrent(t *testing.T) {
	target := openTarget(t)
	m := openDrafter(t, target, blockdrafttest.Options{Block: 5, Seed: 8, Type: ggml.TypeQ8_0}, 2)
	reqs := randomRequests(m, 4, 21)
	want := make([][]int32, len(reqs))
	for i := range reqs {
		rs := clone(reqs[i : i+1])
		if err := m.Draft(context.Background(), rs); err != nil {
			t.Fatal(err)
		}
		want[i] = rs[0].Tokens
	}
	errs := make(chan error, len(reqs))
	for i := range reqs {
		go func() {
			rs := clone(reqs[i : i+1])
			for range 20 {
				if err := m.Draft(context.Background(), rs); err != nil {
					errs <- err
					return
				}
				if !slices.Equal(rs[0].Tokens, want[i]) {
					errs <- fmt.Errorf("request %d: drafted %v, alone %v", i, rs[0].Tokens, want[i])
					return
				}
			}
			errs <- nil
		}()
	}
	for range reqs {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestLogits checks that Logits returns the numbers Draft's tokens are
// the argmax of, for the positions Max asks for, and leaves Tokens alone.
func TestLogits(t *testing.T) {
	target := openTarget(t)
	m := openDrafter(t, target, blockdrafttest.Options{Block: 6, Seed: 4, Type: ggml.TypeQ8_0}, 2)
	reqs := randomRequests(m, 3, 8)
	reqs[1].Max = 2
	reqs[2].Tokens = []int32{7, 7}
	lg, err := m.Logits(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reqs[2].Tokens, []int32{7, 7}) {
		t.Errorf("Logits wrote Tokens: %v", reqs[2].Tokens)
	}
	drafts := clone(reqs)
	if err := m.Draft(context.Background(), drafts); err != nil {
		t.Fatal(err)
	}
	for i, r := range drafts {
		if len(lg[i]) != len(r.Tokens) {
			t.Fatalf("request %d: %d rows of logits, want %d", i, len(lg[i]), len(r.Tokens))
		}
		for j, l := range lg[i] {
			if len(l) != m.Vocab() {
				t.Fatalf("request %d position %d: %d logits, want %d", i, j+1, len(l), m.Vocab())
			}
			best := 0
			for v := range l {
				if l[v] > l[best] {
					best = v
				}
			}
			if int32(best) != r.Tokens[j] {
				t.Errorf("request %d position %d: argmax %d, Draft's token %d", i, j+1, best, r.Tokens[j])
			}
		}
	}
	if len(lg[1]) != 2 {
		t.Errorf("Max 2: %d rows of logits, want 2", len(lg[1]))
	}
	if _, err := m.Logits(context.Background(), []blockdraft.Request{{Hidden: nil, Max: 1}}); !errors.Is(err, blockdraft.ErrRequest) {
		t.Errorf("a bad request: got %v, want ErrRequest", err)
	}
}
