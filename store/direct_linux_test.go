package store_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/vfs"
	"github.com/muserhq/muser/store/vfs/errorfs"
)

// fileOps records, per file, the operations on files under chunks/.
type fileOps struct {
	mu  sync.Mutex
	ops map[string][]errorfs.Op
}

func (l *fileOps) MaybeError(op errorfs.Op, path string) error {
	if !strings.Contains(path, string(filepath.Separator)+"chunks"+string(filepath.Separator)) {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops[path] = append(l.ops[path], op)
	return nil
}

// residentPages returns how many of the pages of the file at path are in
// the page cache (mincore), and how many pages it has.
func residentPages(t *testing.T, path string) (resident, pages int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	ps := os.Getpagesize()
	vec := make([]byte, (len(m)+ps-1)/ps)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(m))), uintptr(len(m)), uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		if v&1 != 0 {
			resident++
		}
	}
	return resident, len(vec)
}

// TestChunkSinkDirectTails: with direct I/O, a received chunk of every
// length class relative to the alignment (smaller than it, a multiple of
// it, a multiple plus a tail of 1 byte, half of it, all but one byte) is
// stored with exactly its bytes and size; the aligned body bypasses the
// page cache (mincore finds at most the tail's page resident), direct
// I/O is turned off (EndDirect) before a tail's write and never for an
// aligned chunk, and always before the fsync (rule W1 unchanged).
func TestChunkSinkDirectTails(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("direct I/O is used on Linux only")
	}
	ctx := context.Background()
	dir := t.TempDir()
	log := &fileOps{ops: map[string][]errorfs.Op{}}
	s := storetest.Open(t, dir, store.Options{BlockTokens: 4, FS: errorfs.Wrap(vfs.Default, log)})
	if got := s.ChunkWrites(); got.Known {
		t.Fatalf("ChunkWrites before any chunk: got %+v, want unknown", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var (
		sizes []int
		data  [][]byte
		ids   []pack.Digest
	)
	// put stores chunks of the given sizes through a sink with one
	// worker (files written in order).
	put := func(add ...int) {
		k, err := s.NewChunkSink(pack.Digest{7}, "test", store.ChunkSinkOptions{Syncers: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range add {
			d := make([]byte, n)
			for j := range d {
				d[j] = byte(rng.Uint32())
			}
			sizes, data, ids = append(sizes, n), append(data, d), append(ids, pack.ChunkID(d))
			if err := k.Put(ctx, ids[len(ids)-1], n, bytes.NewReader(d)); err != nil {
				t.Fatalf("Put of %d bytes: %v", n, err)
			}
		}
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// The first chunk is large and page-aligned: it decides the mode.
	put(768 << 10)
	mode := s.ChunkWrites()
	if !mode.Known || !mode.Direct {
		if strings.Contains(mode.Fallback, vfs.ErrNoDirect.Error()) {
			t.Skipf("the test directory's file system refuses direct I/O: %s", mode.Fallback)
		}
		t.Fatalf("ChunkWrites: got %+v, want direct I/O", mode)
	}
	a := mode.Align
	if a < 512 || a&(a-1) != 0 {
		t.Fatalf("alignment %d: want a power of two of at least 512", a)
	}
	// Every length class relative to the alignment.
	put(1, a/2-1, a/2, a-1, a, a+1, 2*a-1, 3*a, 3*a+1, 3*a+a/2, 3*a+a-1, 768<<10+12<<10+100)
	endDirects := 0
	for path, ops := range log.ops {
		written := false
		for _, op := range ops {
			switch op {
			case errorfs.OpWrite:
				written = true
			case errorfs.OpEndDirect:
				endDirects++
			case errorfs.OpSync:
				if !written {
					t.Errorf("%s: fsync before any write: %v", path, ops)
				}
			}
			if op == errorfs.OpEndDirect && slicesIndex(ops, errorfs.OpSync) >= 0 && slicesIndex(ops, errorfs.OpSync) < slicesIndex(ops, errorfs.OpEndDirect) {
				t.Errorf("%s: EndDirect after the fsync: %v", path, ops)
			}
		}
	}
	// Only chunks with an aligned body and a tail turn direct I/O off;
	// chunks smaller than the alignment are plain files.
	want := 0
	for _, n := range sizes {
		if n >= a && n%a != 0 {
			want++
		}
	}
	if endDirects != want {
		t.Errorf("EndDirect calls: got %d, want %d", endDirects, want)
	}
	for i, n := range sizes {
		path := chunkFile(dir, ids[i])
		if n >= 8*a && n >= 64<<10 { // before the read below brings the file into the cache
			res, pages := residentPages(t, path)
			if res > 1 {
				t.Errorf("chunk of %d bytes: %d of %d pages in the page cache after a direct write, want at most the tail's", n, res, pages)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("chunk of %d bytes: %v", n, err)
		}
		if !bytes.Equal(got, data[i]) {
			t.Errorf("chunk of %d bytes: file holds %d other bytes", n, len(got))
		}
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("files left behind: %v", l)
	}
}

func slicesIndex(ops []errorfs.Op, op errorfs.Op) int {
	for i, o := range ops {
		if o == op {
			return i
		}
	}
	return -1
}

// noDirectFS refuses direct I/O as tmpfs on older kernels does.
type noDirectFS struct{ vfs.FS }

func (noDirectFS) CreateTempDirect(dir, pattern string) (vfs.DirectFile, error) {
	return nil, &fs.PathError{Op: "open", Path: dir, Err: fmt.Errorf("%w: %w", vfs.ErrNoDirect, unix.EINVAL)}
}

// einvalFS opens direct files whose direct writes fail with EINVAL, as
// a file system that accepts O_DIRECT at open but not the write would.
type einvalFS struct{ vfs.FS }

func (e einvalFS) CreateTempDirect(dir, pattern string) (vfs.DirectFile, error) {
	f, err := e.FS.(vfs.DirectCreator).CreateTempDirect(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &einvalFile{DirectFile: f}, nil
}

type einvalFile struct {
	vfs.DirectFile
	ended bool
}

func (e *einvalFile) Write(p []byte) (int, error) {
	if !e.ended {
		return 0, &fs.PathError{Op: "write", Path: e.Name(), Err: unix.EINVAL}
	}
	return e.DirectFile.Write(p)
}

func (e *einvalFile) EndDirect() error { e.ended = true; return e.DirectFile.EndDirect() }

// plainFS is a file system layer without direct I/O at all.
type plainFS struct{ vfs.FS }

// logCount counts the records of a slog handler.
type logCount struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logCount) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCount) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logCount) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCount) WithGroup(string) slog.Handler      { return l }

// TestChunkSinkBufferedFallback: a file system that refuses direct I/O
// at open, one that refuses the direct write (EINVAL), a file system
// layer without it, and a store opened with
// NoDirectWrites all store received chunks through the page cache with
// no error; the mode says why, a refusal is logged once, and the bytes
// are the chunk's (and, written through the page cache, resident).
func TestChunkSinkBufferedFallback(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		opts    func() store.Options
		reason  string
		logs    int
		checkPC bool
	}{
		{"refused", func() store.Options { return store.Options{FS: noDirectFS{vfs.Default}} }, vfs.ErrNoDirect.Error(), 1, runtime.GOOS == "linux"},
		{"no direct layer", func() store.Options { return store.Options{FS: plainFS{vfs.Default}} }, "offers no direct I/O", 1, runtime.GOOS == "linux"},
		{"write refused", func() store.Options { return store.Options{FS: einvalFS{vfs.Default}} }, "a direct write was refused", 1, runtime.GOOS == "linux"},
		{"NoDirectWrites", func() store.Options { return store.Options{NoDirectWrites: true} }, "NoDirectWrites", 0, runtime.GOOS == "linux"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			logs := &logCount{}
			opts := tc.opts()
			opts.BlockTokens = 4
			opts.Logger = slog.New(logs)
			s := storetest.Open(t, dir, opts)
			k, err := s.NewChunkSink(pack.Digest{8}, "test", store.ChunkSinkOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var ids []pack.Digest
			var data [][]byte
			for i, n := range []int{64 << 10, 64<<10 + 7, 100} {
				d := bytes.Repeat([]byte{byte(i + 1), 2, 3}, n/3+1)[:n]
				data = append(data, d)
				ids = append(ids, pack.ChunkID(d))
				if err := k.Put(ctx, ids[i], n, bytes.NewReader(d)); err != nil {
					t.Fatalf("Put: %v", err)
				}
			}
			if err := k.Close(); err != nil {
				t.Fatalf("Close: got %v, want nil (the fallback is not an error)", err)
			}
			mode := s.ChunkWrites()
			if !mode.Known || mode.Direct || !strings.Contains(mode.Fallback, tc.reason) {
				t.Errorf("ChunkWrites: got %+v, want buffered because of %q", mode, tc.reason)
			}
			if len(logs.msgs) != tc.logs {
				t.Errorf("log records: got %q, want %d", logs.msgs, tc.logs)
			}
			if tc.checkPC { // before the reads below
				if res, pages := residentPages(t, chunkFile(dir, ids[0])); res != pages {
					t.Errorf("buffered chunk: %d of %d pages resident, want all", res, pages)
				}
			}
			for i, id := range ids {
				got, err := os.ReadFile(chunkFile(dir, id))
				if err != nil || !bytes.Equal(got, data[i]) {
					t.Fatalf("chunk %d: %d bytes, %v; want its %d bytes", i, len(got), err, len(data[i]))
				}
			}
			if l := leftovers(t, dir); len(l) != 0 {
				t.Errorf("files left behind: %v", l)
			}
		})
	}
}

// TestCrashSafetySink is TestCrashSafety for received packs: the child
// stores chunks through a ChunkSink (direct I/O where the file system
// offers it; lengths of every class relative to a 4096-byte alignment)
// and publishes each pack after Close, until it is killed.
func TestCrashSafetySink(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		seed, _ := strconv.ParseUint(os.Getenv(crashEnv+"_SEED"), 10, 64)
		crashSinkChild(dir, seed)
		return
	}
	crashLoop(t, "TestCrashSafetySink", 40)
}

// crashSinkChild is the child role of TestCrashSafetySink.
func crashSinkChild(dir string, seed uint64) {
	ctx := context.Background()
	s, err := store.Open(dir, store.Options{BlockTokens: 4, OrphanGrace: -1})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	rng := rand.New(rand.NewPCG(seed, 2))
	id := packtest.Identity("crash")
	tails := []int{0, 1, 511, 512, 2048, 4095}
	for i := 0; ; i++ {
		toks := packtest.Tokens(seed*1000+uint64(i), 4*(1+rng.IntN(6)), 100)
		size := 4096*rng.IntN(24) + tails[rng.IntN(len(tails))]
		if size == 0 {
			size = 4096
		}
		get := storetest.KV(id, nil, toks, 4, size)
		m := &pack.Manifest{Identity: id, BlockTokens: 4, Tenant: pack.TenantTag(nil), Tokens: toks,
			Producer: "crash", Generation: 1, Created: time.Unix(1, 0).UTC()}
		var chunks [][]byte
		for b := range len(toks) / 4 {
			kv, err := get(b)
			if err != nil {
				fmt.Println("kv:", err)
				os.Exit(2)
			}
			chunks = append(chunks, kv)
			m.Chunks = append(m.Chunks, pack.ChunkRef{ID: pack.ChunkID(kv), Size: uint32(len(kv))})
		}
		m.Root = pack.MerkleRoot(m.ChunkIDs())
		k, err := s.NewChunkSink(pack.Digest{byte(i), byte(i >> 8)}, "crash", store.ChunkSinkOptions{})
		if err != nil {
			fmt.Println("sink:", err)
			os.Exit(2)
		}
		for j, c := range chunks {
			if err := k.Put(ctx, m.Chunks[j].ID, len(c), bytes.NewReader(c)); err != nil {
				fmt.Println("put:", err)
				os.Exit(2)
			}
		}
		if err := k.Close(); err != nil {
			fmt.Println("close:", err)
			os.Exit(2)
		}
		if _, _, err := s.PublishPack(ctx, m, store.PublishOptions{Source: "crash"}); err != nil {
			fmt.Println("publish:", err)
			os.Exit(2)
		}
		if rng.IntN(8) == 0 {
			if _, err := s.GC(ctx, store.GCOptions{MaxBytes: 1 << 20}); err != nil {
				fmt.Println("gc:", err)
				os.Exit(2)
			}
		}
	}
}
