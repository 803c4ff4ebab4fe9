// Command gen writes the GGUF files that scripts/gguf-llamacpp/check.mjs
// loads in llama.cpp: tiny llama models with random weights in several
// tensor types, built with infer/gguf's Builder and a SentencePiece vocab
// copied from stories260K, plus stories260K itself re-encoded and
// re-quantized by muser.
//
//	go run ./scripts/gguf-llamacpp/gen -model ../shared/models/stories260K.gguf -out DIR
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

func main() {
	model := flag.String("model", "../shared/models/stories260K.gguf", "stories260K.gguf, whose vocab the tiny models copy")
	out := flag.String("out", "", "directory to write the models to")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "gen: -out is required")
		os.Exit(2)
	}
	if err := run(*model, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(modelPath, out string) error {
	src, err := gguf.Open(modelPath)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}

	// stories260K re-encoded unchanged, and re-quantized to Q8_0 (rows
	// that are not whole Q8_0 blocks stay F32, as llama.cpp's quantizer
	// falls back too).
	b, err := gguf.NewBuilderFrom(src)
	if err != nil {
		return err
	}
	if err := b.WriteFile(filepath.Join(out, "stories260K-rewritten.gguf")); err != nil {
		return err
	}
	if err := requantize(src, ggml.TypeQ8_0, filepath.Join(out, "stories260K-q8_0.gguf")); err != nil {
		return err
	}

	// Tiny random llama models whose matrix rows are whole K-quant blocks.
	for _, typ := range []ggml.Type{ggml.TypeF32, ggml.TypeF16, ggml.TypeBF16, ggml.TypeQ8_0, ggml.TypeQ4_0, ggml.TypeQ4_1, ggml.TypeQ5_0, ggml.TypeQ5_1, ggml.TypeQ4_K} {
		name := "tiny-" + strings.ToLower(typ.String())
		if err := tiny(src, typ, false, filepath.Join(out, name+".gguf")); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := tiny(src, typ, true, filepath.Join(out, name+"-twin.gguf")); err != nil {
			return fmt.Errorf("%s twin: %w", name, err)
		}
	}
	return nil
}

// copyVocab copies every tokenizer.* entry of src.
func copyVocab(b *gguf.Builder, src *gguf.File) error {
	for _, kv := range src.Meta.All() {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			if err := b.Set(kv.Key, kv.Value); err != nil {
				return err
			}
		}
	}
	return nil
}

func requantize(src *gguf.File, typ ggml.Type, path string) error {
	b := gguf.NewBuilder()
	for _, kv := range src.Meta.All() {
		if err := b.Set(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	b.SetUint32("general.file_type", 7) // LLAMA_FTYPE_MOSTLY_Q8_0
	for i := range src.Tensors {
		t := &src.Tensors[i]
		vals := make([]float32, t.Elements())
		if err := ggml.Dequantize(t.Type, src.Data(t), vals); err != nil {
			return err
		}
		to := typ
		if len(t.Shape) < 2 || t.Shape[0]%int64(typ.BlockSize()) != 0 {
			to = ggml.TypeF32
		}
		if err := b.AddFloat32(t.Name, to, t.Shape, vals); err != nil {
			return err
		}
	}
	return b.WriteFile(path)
}

// tiny writes a 2-layer llama with random weights: embedding 256, 4 heads
// of 64, 2 KV heads, feed-forward 512, the stories260K vocab (512 tokens).
// The matrices are stored as typ; with twin, they are instead stored as
// F32 holding exactly the values typ decodes to (ggml.Dequantize of
// ggml.Quantize), so that the twin and the typ model differ only in how
// llama.cpp computes with them, not in the weights' values.
func tiny(src *gguf.File, typ ggml.Type, twin bool, path string) error {
	const (
		embd, ff, layers, heads, kvHeads = 256, 512, 2, 4, 2
		headDim                          = embd / heads
	)
	tokens, err := src.Meta.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return err
	}
	vocab := int64(len(tokens))
	b := gguf.NewBuilder()
	b.SetString("general.architecture", "llama")
	b.SetString("general.name", "muser-tiny-"+typ.String())
	b.SetUint32("llama.context_length", 256)
	b.SetUint32("llama.embedding_length", embd)
	b.SetUint32("llama.feed_forward_length", ff)
	b.SetUint32("llama.block_count", layers)
	b.SetUint32("llama.attention.head_count", heads)
	b.SetUint32("llama.attention.head_count_kv", kvHeads)
	b.SetUint32("llama.rope.dimension_count", headDim)
	b.SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5)
	if err := copyVocab(b, src); err != nil {
		return err
	}
	r := rand.New(rand.NewSource(1))
	randn := func(n int64, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * scale)
		}
		return v
	}
	ones := func(n int64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	add := func(name string, t ggml.Type, shape []int64, vals []float32) {
		if err != nil {
			return
		}
		if twin && t != ggml.TypeF32 {
			var size int
			if size, err = t.RowSize(len(vals)); err != nil {
				return
			}
			q := make([]byte, size)
			if err = ggml.Quantize(t, vals, q); err != nil {
				return
			}
			if err = ggml.Dequantize(t, q, vals); err != nil {
				return
			}
			t = ggml.TypeF32
		}
		err = b.AddFloat32(name, t, shape, vals)
	}
	add("token_embd.weight", typ, []int64{embd, vocab}, randn(embd*vocab, 1))
	add("output_norm.weight", ggml.TypeF32, []int64{embd}, ones(embd))
	add("output.weight", typ, []int64{embd, vocab}, randn(embd*vocab, 4/math.Sqrt(embd)))
	for l := 0; l < layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", ggml.TypeF32, []int64{embd}, ones(embd))
		add(p+"attn_q.weight", typ, []int64{embd, embd}, randn(embd*embd, 1/math.Sqrt(embd)))
		add(p+"attn_k.weight", typ, []int64{embd, kvHeads * headDim}, randn(embd*kvHeads*headDim, 1/math.Sqrt(embd)))
		add(p+"attn_v.weight", typ, []int64{embd, kvHeads * headDim}, randn(embd*kvHeads*headDim, 1/math.Sqrt(embd)))
		add(p+"attn_output.weight", typ, []int64{embd, embd}, randn(embd*embd, 1/math.Sqrt(embd)))
		add(p+"ffn_norm.weight", ggml.TypeF32, []int64{embd}, ones(embd))
		add(p+"ffn_gate.weight", typ, []int64{embd, ff}, randn(embd*ff, 1/math.Sqrt(embd)))
		add(p+"ffn_up.weight", typ, []int64{embd, ff}, randn(embd*ff, 1/math.Sqrt(embd)))
		add(p+"ffn_down.weight", typ, []int64{ff, embd}, randn(ff*embd, 1/math.Sqrt(ff)))
	}
	if err != nil {
		return err
	}
	return b.WriteFile(path)
}
