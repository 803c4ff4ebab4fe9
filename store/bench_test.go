package store_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
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
// BLAKE3-checked before put sees it) and the raw baselines: read the same
// chunk files into a buffer and BLAKE3 each, with zeebo/blake3 (raw) and
// with the store's own hash, internal/b3 through pack.ChunkID (raw-b3),
// rotating which runs first. Page cache warm. It reports the three
// rates and the ratios restore time / raw time.
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
	read := func(sum func([]byte)) {
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
			sum(buf)
		}
	}
	raw := func() { read(func(buf []byte) { _ = blake3.Sum256(buf) }) }
	rawB3 := func() { read(func(buf []byte) { _ = pack.ChunkID(buf) }) }
	restore := func() {
		n, err := s.Restore(context.Background(), qwenID, nil, toks, func(int, []byte) error { return nil })
		if err != nil || n != qwenTokens {
			b.Fatalf("restored %d tokens: %v", n, err)
		}
	}
	raw()
	restore() // warm the page cache
	var tRaw, tRawB3, tRestore time.Duration
	timed := func(f func(), t *time.Duration) {
		t0 := time.Now()
		f()
		*t += time.Since(t0)
	}
	b.SetBytes(total)
	for i := 0; b.Loop(); i++ {
		// Rotate the order so no side always follows another.
		steps := []func(){
			func() { timed(restore, &tRestore) },
			func() { timed(raw, &tRaw) },
			func() { timed(rawB3, &tRawB3) },
		}
		for k := range steps {
			steps[(i+k)%len(steps)]()
		}
	}
	mib := float64(total) / (1 << 20)
	b.ReportMetric(mib*float64(b.N)/tRestore.Seconds(), "restore-MiB/s")
	b.ReportMetric(mib*float64(b.N)/tRaw.Seconds(), "raw-MiB/s")
	b.ReportMetric(mib*float64(b.N)/tRawB3.Seconds(), "raw-b3-MiB/s")
	b.ReportMetric(tRestore.Seconds()/tRaw.Seconds(), "restore/raw")
	b.ReportMetric(tRestore.Seconds()/tRawB3.Seconds(), "restore/raw-b3")
}

// BenchmarkPutChunk measures the receiving end of a transfer: PutChunk
// (BLAKE3, temporary file, write, fsync unless nosync, rename) of 64
// distinct 768 KiB chunks into an empty store from 1 to 16 goroutines, then PublishPack of a
// manifest naming them (the owed directory fsyncs, the manifest, the
// ledger commit), against the peer measured in the same loop: BLAKE3 of
// each chunk and os.WriteFile of it into one directory (no fsync, no
// rename). Run:
//
//	go test -run '^$' -bench 'PutChunk' -benchtime 5x -count 3 ./store/
func BenchmarkPutChunk(b *testing.B) {
	const n = 64
	toks, all := qwenKV()
	chunks := all[:n]
	refs := make([]pack.ChunkRef, n)
	for i, c := range chunks {
		refs[i] = pack.ChunkRef{ID: pack.ChunkID(c), Size: uint32(len(c))}
	}
	m := &pack.Manifest{Identity: qwenID, BlockTokens: qwenBlock, Tokens: toks[:n*qwenBlock], Chunks: refs,
		Producer: "bench", Generation: 1, Created: time.Unix(1, 0).UTC()}
	m.Root = pack.MerkleRoot(m.ChunkIDs())
	root := b.TempDir()
	for _, v := range []struct {
		noSync  bool
		workers int
	}{{true, 1}, {false, 1}, {false, 4}, {false, 16}} {
		name := "fsync"
		if v.noSync {
			name = "nosync"
		}
		name += "/workers=" + strconv.Itoa(v.workers)
		noSync := v.noSync
		b.Run(name, func(b *testing.B) {
			b.SetBytes(n * qwenChunk)
			var put, raw time.Duration
			for i := range b.N {
				b.StopTimer()
				dir := filepath.Join(root, name, strconv.Itoa(i))
				s, err := store.Open(dir, store.Options{BlockTokens: qwenBlock, NoSync: noSync})
				if err != nil {
					b.Fatal(err)
				}
				rawDir := filepath.Join(root, "raw", strconv.Itoa(i))
				if err := os.MkdirAll(rawDir, 0o700); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				t0 := time.Now()
				var wg sync.WaitGroup
				errs := make([]error, n)
				for w := range v.workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := w; j < n; j += v.workers {
							errs[j] = s.PutChunk(context.Background(), refs[j].ID, chunks[j], "bench")
						}
					}()
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					b.Fatal(err)
				}
				if _, _, err := s.PublishPack(context.Background(), m, store.PublishOptions{Source: "bench"}); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				for j, c := range chunks {
					if pack.ChunkID(c) != refs[j].ID {
						b.Fatalf("chunk %d: hash changed", j)
					}
					if err := os.WriteFile(filepath.Join(rawDir, strconv.Itoa(j)), c, 0o600); err != nil {
						b.Fatal(err)
					}
				}
				t2 := time.Now()
				put += t1.Sub(t0)
				raw += t2.Sub(t1)
				b.StopTimer()
				s.Close()
				os.RemoveAll(dir)
				os.RemoveAll(rawDir)
				b.StartTimer()
			}
			mb := float64(n*qwenChunk) / 1e6 * float64(b.N)
			b.ReportMetric(mb/put.Seconds(), "put-MB/s")
			b.ReportMetric(mb/raw.Seconds(), "raw-MB/s")
			b.ReportMetric(put.Seconds()/raw.Seconds(), "put/raw")
		})
	}
}
