package enginetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

// Llama3Rope is the Llama 3.1 RoPE frequency scaling.
type Llama3Rope struct {
	Factor, LowFreqFactor, HighFreqFactor float64
	OrigCtx                               int
}

// Shape is a model's architecture and sizes.
type Shape struct {
	Name     string // short name used in file names ("qwen2.5-0.5b")
	Arch     string // general.architecture
	Hidden   int
	Layers   int
	Heads    int
	KVHeads  int
	HeadDim  int
	FFN      int
	Vocab    int
	CtxTrain int
	RopeBase float32
	Eps      float32
	QKVBias  bool
	QKNorm   bool
	Untied   bool        // write a separate output.weight
	Llama3   *Llama3Rope // write rope_freqs.weight
	// LogitStd is the standard deviation of the logits' spread (default 4).
	LogitStd float64
	// LayerGain is the norm of everything the layers add to the residual
	// stream relative to the token embedding (default 0.15; see doc.go).
	LayerGain float64
}

// The published shapes (each number checked against the model's
// config.json).
var (
	// Llama32_1B is Llama-3.2-1B: hidden 2048, 16 layers, 32 heads, 8 KV
	// heads, head dim 64, FFN 8192, vocab 128256, tied embeddings, RoPE
	// base 500000 with Llama 3 scaling (factor 32, low 1, high 4, original
	// context 8192), eps 1e-5.
	Llama32_1B = Shape{Name: "llama-3.2-1b", Arch: "llama", Hidden: 2048, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64,
		FFN: 8192, Vocab: 128256, CtxTrain: 131072, RopeBase: 500000, Eps: 1e-5,
		Llama3: &Llama3Rope{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OrigCtx: 8192}}
	// Qwen25_05B is Qwen2.5-0.5B: hidden 896, 24 layers, 14 heads, 2 KV
	// heads, head dim 64, FFN 4864, vocab 151936, Q/K/V bias, tied, RoPE
	// base 1e6, eps 1e-6.
	Qwen25_05B = Shape{Name: "qwen2.5-0.5b", Arch: "qwen2", Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64,
		FFN: 4864, Vocab: 151936, CtxTrain: 32768, RopeBase: 1e6, Eps: 1e-6, QKVBias: true}
	// Qwen3_06B is Qwen3-0.6B: hidden 1024, 28 layers, 16 heads, 8 KV
	// heads, head dim 128, FFN 3072, vocab 151936, Q/K norms, tied, RoPE
	// base 1e6, eps 1e-6.
	Qwen3_06B = Shape{Name: "qwen3-0.6b", Arch: "qwen3", Hidden: 1024, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128,
		FFN: 3072, Vocab: 151936, CtxTrain: 40960, RopeBase: 1e6, Eps: 1e-6, QKNorm: true}
)

// Tiny returns a small model of the given architecture ("llama", "qwen2"
// or "qwen3") whose matrices still take every quantization: hidden 256,
// 2 layers, 4 heads, 2 KV heads, vocab 320. The llama variant has an
// untied output and Llama 3 rope_freqs; qwen3's head dim (32) differs
// from hidden/heads.
func Tiny(arch string) Shape {
	s := Shape{Name: "tiny-" + arch, Arch: arch, Hidden: 256, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64,
		FFN: 512, Vocab: 320, CtxTrain: 4096, RopeBase: 10000, Eps: 1e-5}
	switch arch {
	case "llama":
		s.Untied = true
		s.Llama3 = &Llama3Rope{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigCtx: 64}
	case "qwen2":
		s.QKVBias = true
		s.RopeBase = 1e6
	case "qwen3":
		s.QKNorm = true
		s.HeadDim = 32
	}
	return s
}

// Micro returns a model of arch small enough to serve as a fuzz seed (a
// few kilobytes at Q8_0): hidden 32, 1 layer, 2 heads, 1 KV head of 16
// dims, FFN 32, vocab 16, with the same per-architecture switches as Tiny.
func Micro(arch string) Shape {
	s := Tiny(arch)
	s.Name = "micro-" + arch
	s.Hidden, s.Layers, s.Heads, s.KVHeads, s.HeadDim, s.FFN, s.Vocab = 32, 1, 2, 1, 16, 32, 16
	return s
}

// Params returns the number of weights of s.
func (s Shape) Params() int64 {
	q, kv := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	h, f := int64(s.Hidden), int64(s.FFN)
	per := h*q + 2*h*kv + q*h + 3*h*f + 2*h
	if s.QKVBias {
		per += q + 2*kv
	}
	if s.QKNorm {
		per += 2 * int64(s.HeadDim)
	}
	n := int64(s.Layers)*per + int64(s.Vocab)*h + h
	if s.Untied {
		n += int64(s.Vocab) * h
	}
	return n
}

// TypeFor returns the type a matrix with rows of n elements is stored in
// when quant is requested: ggml.Fallback, llama.cpp's fallback rule (doc.go).
func TypeFor(quant ggml.Type, n int) ggml.Type {
	return ggml.Fallback(quant, n)
}

// RopeFreqs returns the Llama 3.1 rope_freqs factors for rotated dims d
// and frequency base.
func (r *Llama3Rope) RopeFreqs(d int, base float64) []float32 {
	low := float64(r.OrigCtx) / r.LowFreqFactor
	high := float64(r.OrigCtx) / r.HighFreqFactor
	out := make([]float32, d/2)
	for i := range out {
		freq := 1 / math.Pow(base, float64(2*i)/float64(d))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < high:
			out[i] = 1
		case wavelen > low:
			out[i] = float32(r.Factor)
		default:
			smooth := (float64(r.OrigCtx)/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/r.Factor + smooth))
		}
	}
	return out
}

// Build returns a Builder holding the model s with weights stored as quant
// (F16, Q8_0, Q4_K or NVFP4, or any type ggml.Quantize encodes), drawn
// from seed.
func Build(s Shape, quant ggml.Type, seed uint64) (*gguf.Builder, error) {
	return BuildMix(s, Uniform(quant), seed)
}

// BuildMix is Build with each matrix's type chosen by mix. The weights
// drawn do not depend on the mix: the same seed gives the same values,
// stored in other types.
func BuildMix(s Shape, mix Mix, seed uint64) (*gguf.Builder, error) {
	if s.LogitStd == 0 {
		s.LogitStd = 4
	}
	if s.LayerGain == 0 {
		s.LayerGain = 0.15
	}
	b := gguf.NewBuilder()
	a := s.Arch + "."
	set := func(key string, v any) { b.Set(key, v) }
	set("general.architecture", s.Arch)
	set("general.name", fmt.Sprintf("muser random %s %s seed %d", s.Name, mix.Name, seed))
	set(a+"context_length", uint32(s.CtxTrain))
	set(a+"embedding_length", uint32(s.Hidden))
	set(a+"block_count", uint32(s.Layers))
	set(a+"feed_forward_length", uint32(s.FFN))
	set(a+"attention.head_count", uint32(s.Heads))
	set(a+"attention.head_count_kv", uint32(s.KVHeads))
	set(a+"attention.key_length", uint32(s.HeadDim))
	set(a+"attention.value_length", uint32(s.HeadDim))
	set(a+"attention.layer_norm_rms_epsilon", s.Eps)
	set(a+"rope.freq_base", s.RopeBase)
	set(a+"rope.dimension_count", uint32(s.HeadDim))
	setVocab(b, s.Vocab)

	idx := uint64(0)
	gen := func() *rand.Rand { idx++; return rand.New(rand.NewPCG(seed, idx)) }
	normal := func(n int, mean, std float64) []float32 {
		r := gen()
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(mean + std*r.NormFloat64())
		}
		return v
	}
	layer := -1 // the block being written
	matrix := func(name string, cols, rows int, std float64) {
		base := name
		if layer >= 0 {
			base = strings.TrimPrefix(name, fmt.Sprintf("blk.%d.", layer))
		}
		t := TypeFor(mix.Type(base, layer, s.Layers), cols)
		b.AddFloat32(name, t, []int64{int64(cols), int64(rows)}, normal(cols*rows, 0, std))
	}
	vector := func(name string, n int, mean, std float64) {
		b.AddFloat32(name, ggml.TypeF32, []int64{int64(n)}, normal(n, mean, std))
	}
	// signed is a vector of magnitude mean+N(0,std²) with random signs.
	signed := func(name string, n int, mean, std float64) {
		v := normal(n, mean, std)
		r := gen()
		for i := range v {
			if r.IntN(2) == 0 {
				v[i] = -v[i]
			}
		}
		b.AddFloat32(name, ggml.TypeF32, []int64{int64(n)}, v)
	}
	H, Q, KV, F := s.Hidden, s.Heads*s.HeadDim, s.KVHeads*s.HeadDim, s.FFN
	embStd := s.LogitStd / math.Sqrt(float64(H))
	// Each of the 2·Layers sub-blocks adds an independent update of
	// per-element standard deviation embStd·LayerGain/√(2·Layers). The
	// constants are E[att²] ≈ 0.25 (an average of unit-variance V rows)
	// and E[(silu(g)·u)²] ≈ 0.36 for unit-normal g and u.
	upd := embStd * s.LayerGain / math.Sqrt(float64(2*s.Layers))
	oStd := upd / math.Sqrt(0.25*float64(Q))
	downStd := upd / math.Sqrt(0.36*float64(F))
	if s.Untied {
		matrix("token_embd.weight", H, s.Vocab, embStd)
	} else {
		// Tied: the embedding is the output matrix, and a mix stores it so.
		t := TypeFor(mix.Type("output.weight", -1, s.Layers), H)
		b.AddFloat32("token_embd.weight", t, []int64{int64(H), int64(s.Vocab)}, normal(H*s.Vocab, 0, embStd))
	}
	signed("output_norm.weight", H, 1, 0.1)
	if s.Untied {
		matrix("output.weight", H, s.Vocab, embStd)
	}
	if s.Llama3 != nil {
		f := s.Llama3.RopeFreqs(s.HeadDim, float64(s.RopeBase))
		b.AddFloat32("rope_freqs.weight", ggml.TypeF32, []int64{int64(len(f))}, f)
	}
	for l := range s.Layers {
		layer = l
		n := func(x string) string { return fmt.Sprintf("blk.%d.%s", l, x) }
		vector(n("attn_norm.weight"), H, 1, 0.1)
		matrix(n("attn_q.weight"), H, Q, 1/math.Sqrt(float64(H)))
		matrix(n("attn_k.weight"), H, KV, 1/math.Sqrt(float64(H)))
		matrix(n("attn_v.weight"), H, KV, 1/math.Sqrt(float64(H)))
		if s.QKVBias {
			vector(n("attn_q.bias"), Q, 0, 0.3)
			vector(n("attn_k.bias"), KV, 0, 0.3)
			vector(n("attn_v.bias"), KV, 0, 0.3)
		}
		if s.QKNorm {
			vector(n("attn_q_norm.weight"), s.HeadDim, 1, 0.1)
			vector(n("attn_k_norm.weight"), s.HeadDim, 1, 0.1)
		}
		matrix(n("attn_output.weight"), Q, H, oStd)
		vector(n("ffn_norm.weight"), H, 1, 0.1)
		matrix(n("ffn_gate.weight"), H, F, 1/math.Sqrt(float64(H)))
		matrix(n("ffn_up.weight"), H, F, 1/math.Sqrt(float64(H)))
		matrix(n("ffn_down.weight"), F, H, downStd)
	}
	// The Builder records its first error; WriteTo/Bytes/WriteFile return it.
	return b, nil
}

// setVocab writes a byte-fallback SentencePiece ("llama") vocabulary of n
// tokens: <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF>, then
// "▁t<i>" pieces with decreasing scores.
func setVocab(b *gguf.Builder, n int) {
	tokens := make([]string, 0, n)
	scores := make([]float32, 0, n)
	types := make([]int32, 0, n)
	add := func(t string, score float32, typ int32) {
		if len(tokens) < n {
			tokens, scores, types = append(tokens, t), append(scores, score), append(types, typ)
		}
	}
	const normal, unknown, control, byteTok = 1, 2, 3, 6
	add("<unk>", 0, unknown)
	add("<s>", 0, control)
	add("</s>", 0, control)
	for i := range 256 {
		add(fmt.Sprintf("<0x%02X>", i), 0, byteTok)
	}
	for i := 0; len(tokens) < n; i++ {
		add(fmt.Sprintf("▁t%d", i), -float32(i+1), normal)
	}
	b.Set("tokenizer.ggml.model", "llama")
	b.SetArray("tokenizer.ggml.tokens", tokens)
	b.SetArray("tokenizer.ggml.scores", scores)
	b.SetArray("tokenizer.ggml.token_type", types)
	b.Set("tokenizer.ggml.unknown_token_id", uint32(0))
	b.Set("tokenizer.ggml.bos_token_id", uint32(1))
	b.Set("tokenizer.ggml.eos_token_id", uint32(2))
	b.Set("tokenizer.ggml.add_bos_token", true)
	b.Set("tokenizer.ggml.add_eos_token", false)
}

// WriteFile builds the model and writes it atomically to path.
func WriteFile(path string, s Shape, quant ggml.Type, seed uint64) error {
	return WriteMixFile(path, s, Uniform(quant), seed)
}

// WriteMixFile is WriteFile with each matrix's type chosen by mix.
func WriteMixFile(path string, s Shape, mix Mix, seed uint64) error {
	b, err := BuildMix(s, mix, seed)
	if err != nil {
		return err
	}
	return b.WriteFile(path)
}
