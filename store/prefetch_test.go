package store_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/vfs"
	"github.com/muserhq/muser/store/vfs/errorfs"
)

// openLog records the chunk files opened for reading, in order.
type openLog struct {
	mu    sync.Mutex
	opens []string
}

func (l *openLog) MaybeError(op errorfs.Op, path string) error {
	if op == errorfs.OpOpen && strings.Contains(path, string(filepath.Separator)+"chunks"+string(filepath.Separator)) {
		l.mu.Lock()
		l.opens = append(l.opens, filepath.Base(path))
		l.mu.Unlock()
	}
	return nil
}

func (l *openLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.opens...)
}

// TestRestorePrefetch: a restore asks for the chunk files ahead of the
// block it verifies, about store.PrefetchAhead bytes and no more while
// the reader stays on its first block, then the rest (each at most
// once), and restores the pack's bytes.
func TestRestorePrefetch(t *testing.T) {
	const n, size = 100, 256 << 10
	window := (store.PrefetchAhead + size - 1) / size // chunks the prefetcher runs ahead
	ctx := context.Background()
	dir := t.TempDir()
	log := &openLog{}
	s := storetest.Open(t, dir, store.Options{BlockTokens: 4, FS: errorfs.Wrap(vfs.Default, log)})
	m, data := sinkPackSized(t, 91, n, size)
	k, err := s.NewChunkSink(pack.Digest{4}, "test", store.ChunkSinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range data {
		if err := k.Put(ctx, m.Chunks[i].ID, len(d), bytes.NewReader(d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	pid, _, err := s.PublishPack(ctx, m, store.PublishOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]int{}
	for i, c := range m.Chunks {
		index[c.ID.String()] = i
	}
	before := len(log.snapshot())
	got := 0
	_, err = s.RestorePack(ctx, store.RestoreRequest{Pack: pid, Identity: m.Identity}, func(i int, kv []byte) error {
		if !bytes.Equal(kv, data[i]) {
			t.Errorf("block %d restores to other bytes", i)
		}
		got++
		if i != 0 {
			return nil
		}
		// The reader holds block 0: the prefetcher reaches its window
		// and stops there.
		for len(log.snapshot())-before < 1+window {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		opens := log.snapshot()[before:]
		if len(opens) != 1+window {
			t.Errorf("opens while the reader is on block 0: got %d, want %d (block 0 and %d ahead)", len(opens), 1+window, window)
		}
		// Block 0 by the reader, blocks 1..window by the prefetcher,
		// in whatever order the two goroutines ran.
		seen := map[int]int{}
		for _, o := range opens {
			seen[index[o]]++
		}
		for j := 0; j <= window; j++ {
			if seen[j] != 1 {
				t.Errorf("block %d opened %d times while the reader is on block 0, want once", j, seen[j])
			}
		}
		return nil
	})
	if err != nil || got != n {
		t.Fatalf("restore: %d blocks, %v; want %d", got, err, n)
	}
	counts := map[int]int{}
	for _, o := range log.snapshot()[before:] {
		counts[index[o]]++
	}
	// Block 0 is the reader's alone; blocks in the first window were
	// prefetched while it waited; later ones once by each at most (the
	// prefetcher skips what the reader passed).
	for i := range n {
		switch {
		case i == 0 && counts[i] != 1:
			t.Errorf("chunk of block 0 opened %d times, want 1", counts[i])
		case i >= 1 && i <= window && counts[i] != 2:
			t.Errorf("chunk of block %d opened %d times, want 2 (prefetched, read)", i, counts[i])
		case i > window && (counts[i] < 1 || counts[i] > 2):
			t.Errorf("chunk of block %d opened %d times, want 1 or 2", i, counts[i])
		}
	}
}
