package store_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// BenchmarkChunkSink measures a receiver's store path with fsync, as a
// transfer on 4 streams drives it: 4 goroutines hand 64 distinct 768 KiB
// chunks to the store, then PublishPack names them. "putchunk" is the
// store's PutPackChunk in each goroutine (hash, temporary file, write,
// fsync, rename, one after another); "sink" is a ChunkSink (hash while
// reading, then its workers write, fsync and rename, syncers at once,
// with direct I/O where the file system allows it; "/pagecache" with
// Options.NoDirectWrites). Every variant runs in the same loop, one after another, so they share
// the machine's state; each reports MB/s and the CPU seconds of the
// process per GiB. Run:
//
//	go test -run '^$' -bench 'ChunkSink' -benchtime 4x ./store/
func BenchmarkChunkSink(b *testing.B) {
	const n, putters = 64, 4
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
		syncers  int
		noDirect bool
	}{{0, false}, {1, false}, {4, false}, {16, false}, {16, true}} {
		syncers := v.syncers
		name := "putchunk"
		if syncers > 0 {
			name = "sink/syncers=" + strconv.Itoa(syncers)
		}
		if v.noDirect {
			name += "/pagecache"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(n * qwenChunk)
			var cpu time.Duration
			for i := range b.N {
				b.StopTimer()
				s, err := store.Open(filepath.Join(root, name, strconv.Itoa(i)), store.Options{BlockTokens: qwenBlock, NoDirectWrites: v.noDirect})
				if err != nil {
					b.Fatal(err)
				}
				var sink *store.ChunkSink
				if syncers > 0 {
					if sink, err = s.NewChunkSink(pack.Digest{1}, "bench", store.ChunkSinkOptions{Syncers: syncers}); err != nil {
						b.Fatal(err)
					}
				}
				c0 := benchCPU()
				b.StartTimer()
				var wg sync.WaitGroup
				errs := make([]error, n)
				for w := range putters {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := w; j < n; j += putters {
							if sink != nil {
								errs[j] = sink.Put(context.Background(), refs[j].ID, len(chunks[j]), bytes.NewReader(chunks[j]))
							} else {
								errs[j] = s.PutPackChunk(context.Background(), pack.Digest{1}, refs[j].ID, chunks[j], "bench")
							}
						}
					}()
				}
				wg.Wait()
				if sink != nil {
					errs = append(errs, sink.Close())
				}
				if err := errors.Join(errs...); err != nil {
					b.Fatal(err)
				}
				if _, _, err := s.PublishPack(context.Background(), m, store.PublishOptions{Source: "bench"}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += benchCPU() - c0
				s.Close()
				b.StartTimer()
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N)/(float64(n*qwenChunk)/(1<<30)), "cpu-s/GiB")
		})
	}
}

// benchCPU returns the process's user and system CPU time.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSinkInstallRestore measures what direct I/O in the ChunkSink
// costs the restore that follows an install (the serve path restores
// right after a tier install): the benchmark pack's 512 chunks of 768
// KiB (384 MiB) go through a ChunkSink into a new store (4 goroutines,
// as a transfer on 4 streams, with fsync) and are published; then the
// pack is restored whole (every chunk read and BLAKE3-verified). The
// variants run in turn each iteration: "pagecache" (Options.NoDirectWrites:
// the chunks are still in the page cache when the restore reads them)
// and "direct" (the restore reads them from the disk). Each reports its
// install and restore MB/s and the process's CPU seconds for each.
//
//	go test -run '^$' -bench SinkInstallRestore -benchtime 2x ./store/
func BenchmarkSinkInstallRestore(b *testing.B) {
	const putters = 4
	toks, chunks := qwenKV()
	refs := make([]pack.ChunkRef, len(chunks))
	for i, c := range chunks {
		refs[i] = pack.ChunkRef{ID: pack.ChunkID(c), Size: uint32(len(c))}
	}
	m := &pack.Manifest{Identity: qwenID, BlockTokens: qwenBlock, Tokens: toks, Chunks: refs,
		Producer: "bench", Generation: 1, Created: time.Unix(1, 0).UTC()}
	m.Root = pack.MerkleRoot(m.ChunkIDs())
	total := float64(len(chunks) * qwenChunk)
	variants := []struct {
		name     string
		noDirect bool
	}{{"pagecache", true}, {"direct", false}}
	type acc struct{ install, restore, installCPU, restoreCPU time.Duration }
	res := make([]acc, len(variants))
	root := b.TempDir()
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		for vi, v := range variants {
			s, err := store.Open(filepath.Join(root, v.name, strconv.Itoa(i)), store.Options{BlockTokens: qwenBlock, NoDirectWrites: v.noDirect})
			if err != nil {
				b.Fatal(err)
			}
			c0, t0 := benchCPU(), time.Now()
			sink, err := s.NewChunkSink(pack.Digest{1}, "bench", store.ChunkSinkOptions{})
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make([]error, len(chunks))
			for w := range putters {
				wg.Go(func() {
					for j := w; j < len(chunks); j += putters {
						errs[j] = sink.Put(ctx, refs[j].ID, len(chunks[j]), bytes.NewReader(chunks[j]))
					}
				})
			}
			wg.Wait()
			errs = append(errs, sink.Close())
			if err := errors.Join(errs...); err != nil {
				b.Fatal(err)
			}
			pid, _, err := s.PublishPack(ctx, m, store.PublishOptions{Source: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			c1, t1 := benchCPU(), time.Now()
			n, err := s.RestorePack(ctx, store.RestoreRequest{Pack: pid, Identity: qwenID}, func(int, []byte) error { return nil })
			if err != nil || n != len(toks) {
				b.Fatalf("restore: %d tokens, %v", n, err)
			}
			c2, t2 := benchCPU(), time.Now()
			res[vi].install += t1.Sub(t0)
			res[vi].restore += t2.Sub(t1)
			res[vi].installCPU += c1 - c0
			res[vi].restoreCPU += c2 - c1
			s.Close()
		}
	}
	n := float64(b.N)
	for vi, v := range variants {
		r := res[vi]
		b.ReportMetric(total*n/r.install.Seconds()/1e6, v.name+"-install-MB/s")
		b.ReportMetric(total*n/r.restore.Seconds()/1e6, v.name+"-restore-MB/s")
		b.ReportMetric(r.installCPU.Seconds()/n, v.name+"-install-cpu-s")
		b.ReportMetric(r.restoreCPU.Seconds()/n, v.name+"-restore-cpu-s")
	}
	b.ReportMetric(res[0].restore.Seconds()/res[1].restore.Seconds(), "restore-pagecache/direct")
	b.ReportMetric(0, "ns/op")
}
