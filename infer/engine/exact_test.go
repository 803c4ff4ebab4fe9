package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/infer/kvcache"
)

// sharedModel returns the path of a model in ../shared, or skips.
func sharedModel(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "models", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared test model absent (%v); CI has ../shared beside the clone", err)
	}
	return p
}

func openModel(t testing.TB, path string, opt Options) *Model {
	t.Helper()
	m, err := Open(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// sameBits reports the first index where a and b differ bitwise, or -1.
func sameBits(a, b []float32) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func requireSame(t testing.TB, what string, got, want []float32) {
	t.Helper()
	if i := sameBits(got, want); i >= 0 {
		if i < len(got) && i < len(want) {
			t.Fatalf("%s: differs at %d: got %v (%#x), want %v (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
}

// prefill runs tokens through a fresh sequence in one step and returns it
// and every token's logits.
func prefill(t testing.TB, m *Model, tokens []int32) (*Sequence, []float32) {
	t.Helper()
	seq, err := m.NewSequence(len(tokens) + 64)
	if err != nil {
		t.Fatal(err)
	}
	st := []Step{{Seq: seq, Tokens: tokens, Output: OutputAll}}
	if err := m.Forward(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	return seq, st[0].Logits
}

func randomTokens(r *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(r.IntN(vocab))
	}
	return out
}

// kvBytes returns the lkv1 payload of a sequence's first n tokens.
func kvBytes(t testing.TB, s *Sequence, n int) []byte {
	t.Helper()
	b, err := s.ExportBlock(0, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkExactness is the exactness property test of the issue, for the
// model at path:
//   - for random prompts p and every split point s, prefill(p[:s]) →
//     export → import into a new sequence → prefill(p[s:]) gives logits
//     bit-identical to prefill(p);
//   - decoding p[s:] one token at a time gives the same logits and KV;
//   - the same through a PrefixStore (publish, restore) at block-aligned
//     splits;
//   - 1 thread and several give identical logits and KV, and so does a
//     tiny Options.BatchSize and a batch mixing sequences.
func checkExactness(t *testing.T, path string, prompts, length int) {
	ctx := context.Background()
	m := openModel(t, path, Options{Threads: 3})
	m1 := openModel(t, path, Options{Threads: 1, BatchSize: 5})
	V := m.Config().Vocab
	r := rand.New(rand.NewPCG(uint64(len(path)), 42))
	for pi := range prompts {
		p := randomTokens(r, length, V)
		seq, full := prefill(t, m, p)
		fullKV := kvBytes(t, seq, len(p))

		t.Run(fmt.Sprintf("prompt%d/threads", pi), func(t *testing.T) {
			seq1, full1 := prefill(t, m1, p)
			requireSame(t, "logits at 1 thread, batch size 5 vs 3 threads", full1, full)
			if !slices.Equal(kvBytes(t, seq1, len(p)), fullKV) {
				t.Fatal("KV at 1 thread differs from 3 threads")
			}
		})
		t.Run(fmt.Sprintf("prompt%d/splits", pi), func(t *testing.T) {
			for s := 1; s < len(p); s++ {
				a, err := m.NewSequence(len(p))
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Forward(ctx, []Step{{Seq: a, Tokens: p[:s]}}); err != nil {
					t.Fatal(err)
				}
				kv, err := a.ExportBlock(0, s)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := m.NewSequence(len(p))
				if err := b.ImportBlock(p[:s], kv); err != nil {
					t.Fatal(err)
				}
				st := []Step{{Seq: b, Tokens: p[s:], Output: OutputAll}}
				if err := m.Forward(ctx, st); err != nil {
					t.Fatal(err)
				}
				requireSame(t, fmt.Sprintf("split %d: logits after import", s), st[0].Logits, full[s*V:])
				if !slices.Equal(kvBytes(t, b, len(p)), fullKV) {
					t.Fatalf("split %d: KV after import differs from the full prefill", s)
				}
			}
		})
		t.Run(fmt.Sprintf("prompt%d/decode", pi), func(t *testing.T) {
			s := len(p) / 3
			d, _ := m.NewSequence(len(p))
			if err := m.Forward(ctx, []Step{{Seq: d, Tokens: p[:s], Output: OutputLast}}); err != nil {
				t.Fatal(err)
			}
			st := []Step{{Seq: d, Output: OutputLast}}
			for i := s; i < len(p); i++ {
				st[0].Tokens = p[i : i+1]
				if err := m.Forward(ctx, st); err != nil {
					t.Fatal(err)
				}
				requireSame(t, fmt.Sprintf("decoded token %d", i), st[0].Logits, full[i*V:(i+1)*V])
			}
			if !slices.Equal(kvBytes(t, d, len(p)), fullKV) {
				t.Fatal("KV of decoded tokens differs from the KV of the same tokens prefilled")
			}
		})
		t.Run(fmt.Sprintf("prompt%d/mixed-batch", pi), func(t *testing.T) {
			// One batch: a decode token of sequence A, a prefill chunk of
			// B, and a chunk of C, as a server would schedule them.
			other := randomTokens(r, length/2, V)
			_, otherFull := prefill(t, m, other)
			a, _ := m.NewSequence(len(p))
			if err := m.Forward(ctx, []Step{{Seq: a, Tokens: p[:len(p)-1]}}); err != nil {
				t.Fatal(err)
			}
			b, _ := m.NewSequence(len(p))
			c, _ := m.NewSequence(len(p))
			if err := m.Forward(ctx, []Step{{Seq: c, Tokens: other[:3]}}); err != nil {
				t.Fatal(err)
			}
			st := []Step{
				{Seq: b, Tokens: p[:len(p)/2], Output: OutputAll},
				{Seq: a, Tokens: p[len(p)-1:], Output: OutputLast},
				{Seq: c, Tokens: other[3:], Output: OutputLast},
			}
			if err := m.Forward(ctx, st); err != nil {
				t.Fatal(err)
			}
			requireSame(t, "prefill chunk in a mixed batch", st[0].Logits, full[:len(p)/2*V])
			requireSame(t, "decode token in a mixed batch", st[1].Logits, full[(len(p)-1)*V:])
			requireSame(t, "second prefill in a mixed batch", st[2].Logits, otherFull[(len(other)-1)*V:])
		})
	}
	t.Run("prefix-store", func(t *testing.T) {
		const B = 8
		ps := infertest.NewMemStore(B)
		id := m.Identity([32]byte{1}, [32]byte{2}, B)
		p := randomTokens(r, 4*B+3, V)
		seq, full := prefill(t, m, p)
		if n, err := m.PublishPrefix(ctx, ps, id, nil, seq); err != nil || n != 4*B {
			t.Fatalf("PublishPrefix = %d, %v; want %d tokens", n, err, 4*B)
		}
		for _, cut := range []int{B + 1, 2*B + 5, 4 * B, 4*B + 1, len(p)} {
			q := p[:cut]
			s2, _ := m.NewSequence(len(p))
			n, err := m.RestorePrefix(ctx, ps, id, nil, s2, q)
			if err != nil {
				t.Fatal(err)
			}
			if want := (cut - 1) / B * B; n != want {
				t.Fatalf("restore of %d tokens: got %d, want %d (never the last token)", cut, n, want)
			}
			st := []Step{{Seq: s2, Tokens: q[n:], Output: OutputAll}}
			if err := m.Forward(ctx, st); err != nil {
				t.Fatal(err)
			}
			requireSame(t, fmt.Sprintf("restore %d of %d tokens", n, cut), st[0].Logits, full[n*V:cut*V])
		}
	})
}

func TestExactnessStories(t *testing.T) {
	checkExactness(t, sharedModel(t, "stories260K.gguf"), 3, 70)
}

func TestExactnessF32Cache(t *testing.T) {
	path := sharedModel(t, "stories260K.gguf")
	m := openModel(t, path, Options{Threads: 2, KV: kvcache.DTypeF32})
	m1 := openModel(t, path, Options{Threads: 1, KV: kvcache.DTypeF32})
	r := rand.New(rand.NewPCG(3, 3))
	p := randomTokens(r, 40, m.Config().Vocab)
	_, full := prefill(t, m, p)
	d, _ := m1.NewSequence(64)
	st := []Step{{Seq: d, Output: OutputLast}}
	for i := range p {
		st[0].Tokens = p[i : i+1]
		if err := m1.Forward(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		requireSame(t, fmt.Sprintf("f32 cache, decoded token %d", i), st[0].Logits, full[i*m.Config().Vocab:(i+1)*m.Config().Vocab])
	}
	if got := m.KVString(64); got != "f32;block=64;layout=lkv1" {
		t.Errorf("KVString = %q, want f32;block=64;layout=lkv1", got)
	}
}
