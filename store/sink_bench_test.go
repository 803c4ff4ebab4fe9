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
// reading, then its workers write, fsync and rename, syncers at once).
// Every variant runs in the same loop, one after another, so they share
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
