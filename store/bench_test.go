package store_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
	"github.com/zeebo/blake3"
)

// Benchmarks of docs/benchmarks.md ("KV store"): a 32,768-token pack of a
// Qwen2.5-0.5B-shaped KV (24 layers x 2 KV heads x 64 dims, f16 K and V:
// 12 KiB a token, 768 KiB a 64-token block, 384 MiB in all), published
// and restored (verified), against raw read + BLAKE3 of the same bytes
// from the same files. Run:
//
//	go test -run '^$' -bench 'Qwen' -benchtime 5x ./store/

const (
	qwenTokens     = 32768
	qwenBlock      = 64
	qwenTokenBytes = 24 * 2 * 64 * 2 * 2
	qwenChunk      = qwenBlock * qwenTokenBytes
)

var qwenID = pack.Identity{
	Format: pack.FormatVersion, Model: pack.Digest{1}, Tokenizer: pack.Digest{2}, Template: pack.Digest{3},
	Arch:  "qwen2;layers=24;heads=14;kv_heads=2;head_dim=64;rope=neox;rope_base=1000000;eps=1e-06",
	Quant: "Q8_0", KV: "f16;block=64;layout=lkv1", Engine: "muser-cpu/1",
}

// qwenKV returns the synthetic KV of the benchmark pack: distinct,
// incompressible bytes per block.
func qwenKV() ([]int32, [][]byte) {
	toks := make([]int32, qwenTokens)
	for i := range toks {
		toks[i] = int32(i*7919) % 151000
	}
	chunks := make([][]byte, qwenTokens/qwenBlock)
	for i := range chunks {
		chunks[i] = make([]byte, qwenChunk)
		h := blake3.New()
		h.Write([]byte{byte(i), byte(i >> 8)})
		h.Digest().Read(chunks[i])
	}
	return toks, chunks
}

func openBench(b *testing.B, dir string) *store.Store {
	s, err := store.Open(dir, store.Options{BlockTokens: qwenBlock})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkQwenPublishVsRaw measures, interleaved in one loop, a publish
// of the whole pack into an empty store (each chunk hashed once, written
// to a temporary file, fsynced, renamed; directories fsynced; manifest
// written; ledger committed) and the raw baseline: BLAKE3 each chunk and
// write it to its own file with one fsync each, in one directory. It
// reports both rates and their ratio (publish time / raw time).
func BenchmarkQwenPublishVsRaw(b *testing.B) {
	toks, chunks := qwenKV()
	total := int64(len(chunks)) * qwenChunk
	var tPub, tRaw time.Duration
	b.SetBytes(total)
	for b.Loop() {
		dir := b.TempDir()
		s := openBench(b, dir)
		t0 := time.Now()
		if _, err := s.PublishPrefix(context.Background(), qwenID, nil, toks, func(i int) ([]byte, error) { return chunks[i], nil }); err != nil {
			b.Fatal(err)
		}
		tPub += time.Since(t0)
		s.Close()
		os.RemoveAll(dir)
		raw := filepath.Join(b.TempDir(), "raw")
		os.Mkdir(raw, 0o700)
		t1 := time.Now()
		for i, c := range chunks {
			_ = blake3.Sum256(c)
			f, err := os.Create(filepath.Join(raw, strconv.Itoa(i)))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Write(c); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		tRaw += time.Since(t1)
		os.RemoveAll(raw)
	}
	mib := float64(total) / (1 << 20)
	b.ReportMetric(mib*float64(b.N)/tPub.Seconds(), "publish-MiB/s")
	b.ReportMetric(mib*float64(b.N)/tRaw.Seconds(), "raw-MiB/s")
	b.ReportMetric(tPub.Seconds()/tRaw.Seconds(), "publish/raw")
}

// BenchmarkQwenRestoreVsRaw measures, in the same loop so that both see
// the same machine state, a verified restore of the whole pack (manifest
// hashed to its ID, Merkle root recomputed, every chunk read and
// BLAKE3-checked before put sees it) and the raw baseline: read the same
// chunk files into a buffer and BLAKE3 each, alternating which runs first.
// Page cache warm. It reports
// both rates and their ratio (restore time / raw time).
func BenchmarkQwenRestoreVsRaw(b *testing.B) {
	toks, chunks := qwenKV()
	dir := b.TempDir()
	s := openBench(b, dir)
	defer s.Close()
	if _, err := s.PublishPrefix(context.Background(), qwenID, nil, toks, func(i int) ([]byte, error) { return chunks[i], nil }); err != nil {
		b.Fatal(err)
	}
	var paths []string
	for _, c := range chunks {
		h := pack.ChunkID(c).String()
		paths = append(paths, filepath.Join(dir, "chunks", h[:2], h))
	}
	chunks = nil
	total := int64(len(paths)) * qwenChunk
	raw := func() {
		buf := make([]byte, qwenChunk)
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(f, buf); err != nil {
				b.Fatal(err)
			}
			f.Close()
			_ = blake3.Sum256(buf)
		}
	}
	restore := func() {
		n, err := s.Restore(context.Background(), qwenID, nil, toks, func(int, []byte) error { return nil })
		if err != nil || n != qwenTokens {
			b.Fatalf("restored %d tokens: %v", n, err)
		}
	}
	raw()
	restore() // warm the page cache
	var tRaw, tRestore time.Duration
	b.SetBytes(total)
	for i := 0; b.Loop(); i++ {
		// Alternate the order so neither side always follows the other.
		if i%2 == 0 {
			t0 := time.Now()
			restore()
			tRestore += time.Since(t0)
		}
		t1 := time.Now()
		raw()
		tRaw += time.Since(t1)
		if i%2 == 1 {
			t0 := time.Now()
			restore()
			tRestore += time.Since(t0)
		}
	}
	mib := float64(total) / (1 << 20)
	b.ReportMetric(mib*float64(b.N)/tRestore.Seconds(), "restore-MiB/s")
	b.ReportMetric(mib*float64(b.N)/tRaw.Seconds(), "raw-MiB/s")
	b.ReportMetric(tRestore.Seconds()/tRaw.Seconds(), "restore/raw")
}
