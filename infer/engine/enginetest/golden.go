package enginetest

import (
	"encoding/hex"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/ggml"
)

// Golden is one recorded result of muser's exact numerics: the BLAKE3
// digests of the lkv1 KV payload and of the logits (little-endian float32
// bits) of a prefill of fixed random tokens on one model.
type Golden struct {
	Name string
	// Arch and Quant name a tiny random model (Tiny(Arch) at Quant, seed
	// 11); Arch "" means stories260K from ../shared.
	Arch       string
	Quant      ggml.Type
	KV, Logits string
	// Tokens is the prompt's length; 0 means 160.
	Tokens int
}

// Prompt is the number of tokens g's prefill takes.
func (g Golden) Prompt() int {
	if g.Tokens == 0 {
		return 160
	}
	return g.Tokens
}

// GoldenNumerics is the version of the exact numerics Goldens were
// recorded for (engine.NumericsVersion).
const GoldenNumerics = 2

// Goldens are the recorded digests: every backend of engine.EngineName
// must reproduce them. (The engine before its split into a front and
// backends gave the same digests; the NVFP4 row was recorded when NVFP4
// weights were added, with no change to the other orders. Numerics 2,
// the weighted sum's partial chains of kernels.AttnPart positions, left
// the 160-token rows as they were, shorter than a part; the 600-token
// row, whose later positions add three parts, was recorded for it.)
var Goldens = []Golden{
	{"stories260K", "", 0,
		"1b8eb24fbe4d8ae6026b7fdc4489d60dfb95d60fba0f4e7b48f2cd1c2c5f9fb4", "ec0917f0961592108cfebbefccb96750c2cded2bcc00dc239c99a40fa6abcc03", 0},
	{"llama-F16", "llama", ggml.TypeF16,
		"2dcf7888632d07f164953667c7fcc1f7538b7154564519013451c2bdba4729cf", "015452a2541f504cc0a2423d04258b550221b158e185ee7a4b8498c3d8d5dacd", 0},
	{"qwen2-Q8_0", "qwen2", ggml.TypeQ8_0,
		"7f97d53962bdbe8b39bc4e5b3e58ff3db2710ce251e5a61a05f925d02b5fb6bc", "c82622325d02f42fdca621af6fbd50da4381a7186f93873df68064b5a03e80ba", 0},
	{"qwen3-Q4_K", "qwen3", ggml.TypeQ4_K,
		"e4b59b8d443e870573681dd6ac3b45116e5787591484f7346fdcd8951f7b6e50", "e5b6280616e44c94fdc5ee794cc942aacb39daf87d26c03c5551f63791f13fce", 0},
	{"llama-NVFP4", "llama", ggml.TypeNVFP4,
		"6b463110fa69c8eace1cb3d8e99695d3ebbea2944d0e985c96046f9c26ee61b9", "adfe13ec63c17dd6f51a027beda6182f90dd9bdc0d432e65b6711ffc136dfa6e", 0},
	{"qwen2-Q8_0-600", "qwen2", ggml.TypeQ8_0,
		"2a3a561e8bfa8e537881dc14a6cdb8c587c5e66255f6b905ee13c3afa14b2465", "4d45e45e76d01c172044694eb6a2606ab9e25e122909a6897c95d5713c4e32a4", 600},
}

// GoldenModel returns the path of g's model: stories260K from shared
// (skipping t when it is absent) or a tiny model written to a temporary
// directory.
func GoldenModel(t testing.TB, g Golden, shared string) string {
	t.Helper()
	if g.Arch == "" {
		p := filepath.Join(shared, "models", "stories260K.gguf")
		if _, err := os.Stat(p); err != nil {
			t.Skipf("shared test model absent (%v); CI has ../shared beside the clone", err)
		}
		return p
	}
	path := filepath.Join(t.TempDir(), g.Name+".gguf")
	if err := WriteFile(path, Tiny(g.Arch), g.Quant, 11); err != nil {
		t.Fatal(err)
	}
	return path
}

// NumericsDigests prefills n fixed random tokens on m and returns the
// hex BLAKE3 digests of their KV payload and of their logits.
func NumericsDigests(t testing.TB, m *engine.Model, n int) (kv, logits string) {
	t.Helper()
	p := RandomTokens(rand.New(rand.NewPCG(2026, 12)), n, m.Config().Vocab)
	seq, out := Prefill(t, m, p)
	defer seq.Close()
	k := blake3.Sum256(KVBytes(t, seq, len(p)))
	h := blake3.New()
	var b [4]byte
	for _, v := range out {
		u := math.Float32bits(v)
		b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		h.Write(b[:])
	}
	return hex.EncodeToString(k[:]), hex.EncodeToString(h.Sum(nil))
}
