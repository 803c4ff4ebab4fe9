package blockdrafttest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

// Options shapes a random drafter. Zero sizes take the defaults of Small;
// a zero Type is ggml.TypeF32, and 0 is a seed like any other.
type Options struct {
	Hidden  int       // D, the drafter's embedding length
	Layers  int       // L
	Heads   int       // NH (divides Hidden)
	KVHeads int       // NKV (divides Heads)
	FFN     int       // F
	Block   int       // B, 2..64
	Seed    uint64    // the weights drawn
	Type    ggml.Type // the matrices' type: ggml.TypeF32 or ggml.TypeQ8_0 (any type ggml.Quantize encodes)
	// TargetHidden, when not 0, replaces the target's hidden size (for a
	// drafter of another member of the target's model family, which shares
	// its tokenizer).
	TargetHidden int
	// LogitStd is the standard deviation of the output weights times
	// √Hidden (about the spread of the logits; default 4).
	LogitStd float64
}

// Small returns the defaults: D 64, 1 layer, 4 heads, 2 KV heads, F 128,
// B 4, seed 1, F32 matrices.
func Small() Options {
	return Options{Hidden: 64, Layers: 1, Heads: 4, KVHeads: 2, FFN: 128, Block: 4, Seed: 1, Type: ggml.TypeF32}
}

// Spec returns the shape the recipe trains for the default model family's
// "long" member (hidden 512): D 512, 2 layers, 8 heads, 8 KV heads, F
// 1536, B 8, Q8_0 matrices, seed 1, target hidden 512. With the embedded
// default model's tokenizer (2,048 tokens) it is the drafter of
// BenchmarkDraft.
func Spec() Options {
	return Options{Hidden: 512, Layers: 2, Heads: 8, KVHeads: 8, FFN: 1536, Block: 8, Seed: 1, Type: ggml.TypeQ8_0, TargetHidden: 512}
}

func (o Options) withDefaults() Options {
	d := Small()
	set := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	set(&o.Hidden, d.Hidden)
	set(&o.Layers, d.Layers)
	set(&o.Heads, d.Heads)
	set(&o.KVHeads, d.KVHeads)
	set(&o.FFN, d.FFN)
	set(&o.Block, d.Block)
	if o.LogitStd == 0 {
		o.LogitStd = 4
	}
	return o
}

// TargetHidden returns the hidden size of the target model in f: its
// <general.architecture>.embedding_length.
func TargetHidden(f *gguf.File) (int, error) {
	arch, err := f.Meta.String("general.architecture")
	if err != nil {
		return 0, err
	}
	h, err := f.Meta.Uint32(arch + ".embedding_length")
	if err != nil {
		return 0, err
	}
	if h == 0 {
		return 0, fmt.Errorf("blockdrafttest: %s.embedding_length is 0", arch)
	}
	return int(h), nil
}

// Build returns a Builder holding a random drafter for the target model
// in f: the target's tokenizer.ggml.* keys copied as they are, its hidden
// size as target_hidden, its general.name as target_name, and weights
// drawn from o.Seed (normal, scaled so that activations keep about unit
// size through the layers and the logits spread by about o.LogitStd).
func Build(target *gguf.File, o Options) (*gguf.Builder, error) {
	o = o.withDefaults()
	H := o.TargetHidden
	if H == 0 {
		h, err := TargetHidden(target)
		if err != nil {
			return nil, fmt.Errorf("blockdrafttest: target: %w", err)
		}
		H = h
	}
	tokens, ok := target.Meta.Get(blockdraft.KeyTokens)
	if !ok || !tokens.IsArray() {
		return nil, errors.New("blockdrafttest: the target has no tokenizer.ggml.tokens array")
	}
	if o.Heads <= 0 || o.Hidden%o.Heads != 0 || o.KVHeads <= 0 || o.Heads%o.KVHeads != 0 {
		return nil, fmt.Errorf("blockdrafttest: %d heads, %d KV heads do not divide hidden %d", o.Heads, o.KVHeads, o.Hidden)
	}
	name, _ := target.Meta.StringOr("general.name", "")
	V := tokens.Len()
	D, B, F := o.Hidden, o.Block, o.FFN
	hd := D / o.Heads
	Q, KV := o.Heads*hd, o.KVHeads*hd

	b := gguf.NewBuilder()
	b.Set(blockdraft.KeyArchitecture, blockdraft.Arch)
	b.Set("general.name", fmt.Sprintf("muser random block drafter seed %d", o.Seed))
	b.Set(blockdraft.KeyBlockSize, uint32(B))
	b.Set(blockdraft.KeyEmbedding, uint32(D))
	b.Set(blockdraft.KeyBlockCount, uint32(o.Layers))
	b.Set(blockdraft.KeyFFN, uint32(F))
	b.Set(blockdraft.KeyHeads, uint32(o.Heads))
	b.Set(blockdraft.KeyKVHeads, uint32(o.KVHeads))
	b.Set(blockdraft.KeyEps, float32(1e-5))
	b.Set(blockdraft.KeyRopeBase, float32(10000))
	b.Set(blockdraft.KeyTargetHidden, uint32(H))
	b.Set(blockdraft.KeyTargetName, name)
	for _, kv := range target.Meta.All() {
		if strings.HasPrefix(kv.Key, "tokenizer.ggml.") {
			b.Set(kv.Key, kv.Value)
		}
	}

	idx := uint64(0)
	normal := func(n int, mean, std float64) []float32 {
		idx++
		r := rand.New(rand.NewPCG(o.Seed, idx))
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(mean + std*r.NormFloat64())
		}
		return v
	}
	matrix := func(name string, cols, rows int, std float64) {
		b.AddFloat32(name, o.Type, []int64{int64(cols), int64(rows)}, normal(cols*rows, 0, std))
	}
	vector := func(name string, n int) {
		b.AddFloat32(name, ggml.TypeF32, []int64{int64(n)}, normal(n, 1, 0.1))
	}
	sq := func(n int) float64 { return 1 / math.Sqrt(float64(n)) }
	matrix("token_embd.weight", D, V, 1)
	matrix("mask_embd.weight", D, B-1, 1)
	matrix("fc.weight", D+H, D, sq(D+H))
	for l := range o.Layers {
		n := func(s string) string { return fmt.Sprintf("blk.%d.%s", l, s) }
		vector(n("attn_norm.weight"), D)
		matrix(n("attn_q.weight"), D, Q, sq(D))
		matrix(n("attn_k.weight"), D, KV, sq(D))
		matrix(n("attn_v.weight"), D, KV, sq(D))
		matrix(n("attn_output.weight"), Q, D, sq(Q))
		vector(n("ffn_norm.weight"), D)
		matrix(n("ffn_gate.weight"), D, F, sq(D))
		matrix(n("ffn_up.weight"), D, F, sq(D))
		matrix(n("ffn_down.weight"), F, D, sq(F))
	}
	vector("output_norm.weight", D)
	matrix("output.weight", D, V, o.LogitStd*sq(D))
	// The Builder keeps its first error; Bytes and WriteFile return it.
	return b, nil
}

// Bytes returns the bytes of a random drafter for target (Build).
func Bytes(target *gguf.File, o Options) ([]byte, error) {
	b, err := Build(target, o)
	if err != nil {
		return nil, err
	}
	return b.Bytes()
}

// WriteFile writes a random drafter for target (Build) to path,
// atomically.
func WriteFile(path string, target *gguf.File, o Options) error {
	b, err := Build(target, o)
	if err != nil {
		return err
	}
	return b.WriteFile(path)
}

// WriteFor writes a random drafter for the target model file at
// targetPath to path.
func WriteFor(path, targetPath string, o Options) error {
	f, err := gguf.Open(targetPath)
	if err != nil {
		return err
	}
	defer f.Close()
	return WriteFile(path, f, o)
}
