package engine_test

import (
	"encoding/hex"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
)

// TestNumericsGolden pins muser's exact numerics to recorded bits: the
// BLAKE3 digests of the lkv1 payload and of the logits of a 160-token
// prefill, on stories260K and on tiny random models of each architecture
// at several weight types. Every backend of engine.EngineName must
// reproduce them, and a change to any kernel's or the forward pass's
// arithmetic fails here until NumericsVersion is bumped and the digests
// are recorded again. (Recorded with NumericsVersion 1; the engine before
// its split into a front and backends gave the same digests.)
func TestNumericsGolden(t *testing.T) {
	if engine.NumericsVersion != 1 {
		t.Fatalf("NumericsVersion %d: record the digests of this test for it", engine.NumericsVersion)
	}
	for _, c := range []struct {
		name       string
		arch       string // "" for stories260K
		quant      ggml.Type
		kv, logits string
	}{
		{"stories260K", "", 0,
			"1b8eb24fbe4d8ae6026b7fdc4489d60dfb95d60fba0f4e7b48f2cd1c2c5f9fb4", "ec0917f0961592108cfebbefccb96750c2cded2bcc00dc239c99a40fa6abcc03"},
		{"llama-F16", "llama", ggml.TypeF16,
			"2dcf7888632d07f164953667c7fcc1f7538b7154564519013451c2bdba4729cf", "015452a2541f504cc0a2423d04258b550221b158e185ee7a4b8498c3d8d5dacd"},
		{"qwen2-Q8_0", "qwen2", ggml.TypeQ8_0,
			"7f97d53962bdbe8b39bc4e5b3e58ff3db2710ce251e5a61a05f925d02b5fb6bc", "c82622325d02f42fdca621af6fbd50da4381a7186f93873df68064b5a03e80ba"},
		{"qwen3-Q4_K", "qwen3", ggml.TypeQ4_K,
			"e4b59b8d443e870573681dd6ac3b45116e5787591484f7346fdcd8951f7b6e50", "e5b6280616e44c94fdc5ee794cc942aacb39daf87d26c03c5551f63791f13fce"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var path string
			if c.arch == "" {
				path = sharedModel(t, "stories260K.gguf")
			} else {
				path = filepath.Join(t.TempDir(), c.name+".gguf")
				if err := enginetest.WriteFile(path, enginetest.Tiny(c.arch), c.quant, 11); err != nil {
					t.Fatal(err)
				}
			}
			m := openModel(t, path, opts{Threads: 2})
			kv, logits := numericsDigests(t, m)
			if kv != c.kv || logits != c.logits {
				t.Errorf("numerics %s changed: KV digest %s (recorded %s), logits digest %s (recorded %s)",
					engine.EngineName, kv, c.kv, logits, c.logits)
			}
		})
	}
}

// numericsDigests prefills 160 fixed random tokens and returns the hex
// BLAKE3 digests of their KV payload and of their logits (little-endian
// float32 bits).
func numericsDigests(t *testing.T, m *engine.Model) (kv, logits string) {
	p := enginetest.RandomTokens(rand.New(rand.NewPCG(2026, 12)), 160, m.Config().Vocab)
	seq, out := enginetest.Prefill(t, m, p)
	k := blake3.Sum256(enginetest.KVBytes(t, seq, len(p)))
	h := blake3.New()
	var b [4]byte
	for _, v := range out {
		u := math.Float32bits(v)
		b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		h.Write(b[:])
	}
	return hex.EncodeToString(k[:]), hex.EncodeToString(h.Sum(nil))
}
