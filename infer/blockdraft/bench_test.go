package blockdraft_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/blockdraft/blockdrafttest"
	"github.com/muserhq/muser/infer/defaultmodel"
)

// BenchmarkDraft times one Draft call of the trained shape
// (blockdrafttest.Spec: D 512, 2 layers, 8 heads, 8 KV heads, F 1536,
// B 8, H 512, Q8_0, and the default model's vocabulary of 2,048) on 2
// threads and on 1, for 1 and 4 requests of a full block (7 tokens each): ns/op
// per call, ns/draft and cpu-ns/draft (the process's user+system time,
// getrusage) per request.
//
//	go test -run '^$' -bench BenchmarkDraft -count 5 ./infer/blockdraft/
func BenchmarkDraft(b *testing.B) {
	def, err := defaultmodel.File()
	if err != nil {
		b.Fatal(err)
	}
	defer def.Close()
	path := filepath.Join(b.TempDir(), "spec.gguf")
	if err := blockdrafttest.WriteFile(path, def, blockdrafttest.Spec()); err != nil {
		b.Fatal(err)
	}
	for _, threads := range []int{2, 1} {
		m, err := blockdraft.Open(path, threads)
		if err != nil {
			b.Fatal(err)
		}
		benchDraft(b, m)
		m.Close()
	}
}

func benchDraft(b *testing.B, m *blockdraft.Model) {
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("threads=%d/requests=%d", m.Threads(), n), func(b *testing.B) {
			reqs := randomRequests(m, n, 1)
			ctx := context.Background()
			if err := m.Draft(ctx, reqs); err != nil { // warm the buffers
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for b.Loop() {
				if err := m.Draft(ctx, reqs); err != nil {
					b.Fatal(err)
				}
			}
			cpu := processCPU() - cpu0
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/draft")
			if cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/draft")
			}
		})
	}
}
