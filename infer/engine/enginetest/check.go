package enginetest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/infertest"
)

// TinyModel writes the tiny random model of arch at quant (seed 7) into a
// temporary directory of t and returns its path.
func TinyModel(t testing.TB, arch string, quant ggml.Type) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("tiny-%s-%s.gguf", arch, quant))
	if err := WriteFile(path, Tiny(arch), quant, 7); err != nil {
		t.Fatal(err)
	}
	return path
}

// SameBits returns the first index where a and b differ bitwise, or -1
// when they are equal; different lengths differ at the shorter length.
func SameBits(a, b []float32) int {
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

// RequireSame fails t unless got and want are the same bits, naming the
// first difference.
func RequireSame(t testing.TB, what string, got, want []float32) {
	t.Helper()
	if i := SameBits(got, want); i >= 0 {
		if i < len(got) && i < len(want) {
			t.Fatalf("%s: differs at %d: got %v (%#x), want %v (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
}

// RandomTokens returns n tokens drawn uniformly from [0, vocab).
func RandomTokens(r *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(r.IntN(vocab))
	}
	return out
}

// Prefill runs tokens through a fresh sequence of m in one step and
// returns it and every token's logits.
func Prefill(t testing.TB, m *engine.Model, tokens []int32) (*engine.Sequence, []float32) {
	t.Helper()
	seq, err := m.NewSequence(len(tokens) + 64)
	if err != nil {
		t.Fatal(err)
	}
	st := []engine.Step{{Seq: seq, Tokens: tokens, Output: engine.OutputAll}}
	if err := m.Forward(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	return seq, st[0].Logits
}

// KVBytes returns the lkv1 payload of a sequence's first n tokens.
func KVBytes(t testing.TB, s *engine.Sequence, n int) []byte {
	t.Helper()
	b, err := s.ExportBlock(0, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// CheckExactness is the engine's exactness property test, for model m and
// a variant of it, m2 (the same file at another thread count or batch
// size, or on another backend of the same numerics):
//   - m2's logits and KV of a whole prompt are m's bits;
//   - for random prompts p and every split point s, prefill(p[:s]) →
//     export → import into a new sequence → prefill(p[s:]) gives logits
//     and KV bit-identical to prefill(p);
//   - decoding p[s:] one token at a time gives the same logits and KV;
//   - a batch mixing a decode token and prefill chunks of other sequences
//     gives each its own logits;
//   - the same through a PrefixStore (publish, then restore by
//     engine.Model.RestorePrefix) at block-aligned splits.
//
// Prompts are drawn from a PCG seeded with seed.
func CheckExactness(t *testing.T, m, m2 *engine.Model, seed uint64, prompts, length int) {
	ctx := context.Background()
	V := m.Config().Vocab
	r := rand.New(rand.NewPCG(seed, 42))
	for pi := range prompts {
		p := RandomTokens(r, length, V)
		seq, full := Prefill(t, m, p)
		fullKV := KVBytes(t, seq, len(p))

		t.Run(fmt.Sprintf("prompt%d/variant", pi), func(t *testing.T) {
			seq2, full2 := Prefill(t, m2, p)
			RequireSame(t, "logits of the variant", full2, full)
			if !slices.Equal(KVBytes(t, seq2, len(p)), fullKV) {
				t.Fatal("KV of the variant differs")
			}
		})
		t.Run(fmt.Sprintf("prompt%d/splits", pi), func(t *testing.T) {
			checkSplits(t, m, p, full, fullKV)
		})
		t.Run(fmt.Sprintf("prompt%d/decode", pi), func(t *testing.T) {
			s := len(p) / 3
			d, _ := m.NewSequence(len(p))
			if err := m.Forward(ctx, []engine.Step{{Seq: d, Tokens: p[:s], Output: engine.OutputLast}}); err != nil {
				t.Fatal(err)
			}
			st := []engine.Step{{Seq: d, Output: engine.OutputLast}}
			for i := s; i < len(p); i++ {
				st[0].Tokens = p[i : i+1]
				if err := m.Forward(ctx, st); err != nil {
					t.Fatal(err)
				}
				RequireSame(t, fmt.Sprintf("decoded token %d", i), st[0].Logits, full[i*V:(i+1)*V])
			}
			if !slices.Equal(KVBytes(t, d, len(p)), fullKV) {
				t.Fatal("KV of decoded tokens differs from the KV of the same tokens prefilled")
			}
		})
		t.Run(fmt.Sprintf("prompt%d/mixed-batch", pi), func(t *testing.T) {
			checkMixed(t, m, r, p, full, length)
		})
	}
	t.Run("prefix-store", func(t *testing.T) {
		checkPrefixStore(t, m, r)
	})
}

func checkSplits(t *testing.T, m *engine.Model, p []int32, full []float32, fullKV []byte) {
	ctx := context.Background()
	V := m.Config().Vocab
	for s := 1; s < len(p); s++ {
		a, err := m.NewSequence(len(p))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Forward(ctx, []engine.Step{{Seq: a, Tokens: p[:s]}}); err != nil {
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
		st := []engine.Step{{Seq: b, Tokens: p[s:], Output: engine.OutputAll}}
		if err := m.Forward(ctx, st); err != nil {
			t.Fatal(err)
		}
		RequireSame(t, fmt.Sprintf("split %d: logits after import", s), st[0].Logits, full[s*V:])
		if !slices.Equal(KVBytes(t, b, len(p)), fullKV) {
			t.Fatalf("split %d: KV after import differs from the full prefill", s)
		}
		a.Close()
		b.Close()
	}
}

// checkMixed runs one batch holding a decode token of sequence A, a
// prefill chunk of B and a chunk of C, as a server would schedule them.
func checkMixed(t *testing.T, m *engine.Model, r *rand.Rand, p []int32, full []float32, length int) {
	ctx := context.Background()
	V := m.Config().Vocab
	other := RandomTokens(r, length/2, V)
	_, otherFull := Prefill(t, m, other)
	a, _ := m.NewSequence(len(p))
	if err := m.Forward(ctx, []engine.Step{{Seq: a, Tokens: p[:len(p)-1]}}); err != nil {
		t.Fatal(err)
	}
	b, _ := m.NewSequence(len(p))
	c, _ := m.NewSequence(len(p))
	if err := m.Forward(ctx, []engine.Step{{Seq: c, Tokens: other[:3]}}); err != nil {
		t.Fatal(err)
	}
	st := []engine.Step{
		{Seq: b, Tokens: p[:len(p)/2], Output: engine.OutputAll},
		{Seq: a, Tokens: p[len(p)-1:], Output: engine.OutputLast},
		{Seq: c, Tokens: other[3:], Output: engine.OutputLast},
	}
	if err := m.Forward(ctx, st); err != nil {
		t.Fatal(err)
	}
	RequireSame(t, "prefill chunk in a mixed batch", st[0].Logits, full[:len(p)/2*V])
	RequireSame(t, "decode token in a mixed batch", st[1].Logits, full[(len(p)-1)*V:])
	RequireSame(t, "second prefill in a mixed batch", st[2].Logits, otherFull[(len(other)-1)*V:])
}

// checkPrefixStore publishes a prompt's blocks and restores prefixes of
// it, checking the restore rule's count and the logits after it.
func checkPrefixStore(t *testing.T, m *engine.Model, r *rand.Rand) {
	ctx := context.Background()
	V := m.Config().Vocab
	const B = 8
	ps := infertest.NewMemStore(B)
	id, err := m.Identity(B)
	if err != nil {
		t.Fatal(err)
	}
	p := RandomTokens(r, 4*B+3, V)
	seq, full := Prefill(t, m, p)
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
		// Every whole block, less the prompt's last token if they cover it.
		if want := min(cut/B*B, cut-1); n != want {
			t.Fatalf("restore of %d tokens: got %d, want %d", cut, n, want)
		}
		st := []engine.Step{{Seq: s2, Tokens: q[n:], Output: engine.OutputAll}}
		if err := m.Forward(ctx, st); err != nil {
			t.Fatal(err)
		}
		RequireSame(t, fmt.Sprintf("restore %d of %d tokens", n, cut), st[0].Logits, full[n*V:cut*V])
	}
}
