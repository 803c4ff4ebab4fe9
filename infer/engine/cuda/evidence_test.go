package cuda

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/kvcache"
	"github.com/muserhq/muser/pack"
)

// TestGPUEvidencePrefill is the whole-model evidence of the exact mode,
// run where MUSER_GPU_EVIDENCE names a directory (models are generated
// there when absent): a prefill of MUSER_GPU_EVIDENCE_TOKENS tokens
// (default 2048) of the Qwen2.5-0.5B shape at Q8_0, Q4_K (Q5_0 where rows
// do not fit), F16 and NVFP4, on the GPU and on the CPU engine, whose
// packs' Merkle roots (64-token blocks) and last logits must be equal.
func TestGPUEvidencePrefill(t *testing.T) {
	dir := os.Getenv("MUSER_GPU_EVIDENCE")
	if dir == "" {
		t.Skip("set MUSER_GPU_EVIDENCE to a directory for the whole-model evidence")
	}
	d := gpu(t)
	n := 2048
	if s := os.Getenv("MUSER_GPU_EVIDENCE_TOKENS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 64 {
			t.Fatalf("MUSER_GPU_EVIDENCE_TOKENS=%q: want a number ≥ 64", s)
		}
	}
	for _, q := range []ggml.Type{ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeF16, ggml.TypeNVFP4} {
		t.Run(q.String(), func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("qwen2.5-0.5b-%s-seed1.gguf", q))
			if _, err := os.Stat(path); err != nil {
				if err := enginetest.WriteFile(path, enginetest.Qwen25_05B, q, 1); err != nil {
					t.Fatal(err)
				}
			}
			p := enginetest.RandomTokens(rand.New(rand.NewPCG(7, 7)), n, 151936)
			g := open(t, path, d, kvcache.DTypeF16)
			gRoot, gLast, gTime := prefillRoot(t, g, p)
			c := open(t, path, cpu.New(cpu.Options{Threads: runtime.NumCPU()}), kvcache.DTypeF16)
			cRoot, cLast, cTime := prefillRoot(t, c, p)
			t.Logf("EVIDENCE %s %d tokens: GPU root %s (%v), CPU root %s (%v)", q, n, gRoot, gTime, cRoot, cTime)
			if gRoot != cRoot {
				t.Errorf("Merkle roots differ: GPU %s, CPU %s", gRoot, cRoot)
			}
			enginetest.RequireSame(t, "last logits", gLast, cLast)
		})
	}
}

// prefillRoot prefills p in one Forward and returns the Merkle root of its
// 64-token blocks' chunk IDs, the last token's logits and the time taken.
func prefillRoot(t *testing.T, m *engine.Model, p []int32) (pack.Digest, []float32, time.Duration) {
	seq, err := m.NewSequence(len(p))
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	st := []engine.Step{{Seq: seq, Tokens: p, Output: engine.OutputLast}}
	t0 := time.Now()
	if err := m.Forward(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	var ids []pack.Digest
	for b := 0; b+64 <= len(p); b += 64 {
		kv, err := seq.ExportBlock(b, 64)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, pack.ChunkID(kv))
	}
	return pack.MerkleRoot(ids), st[0].Logits, took
}
