package tier_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/tier"
)

// BenchmarkTier32K moves one pack of the Qwen2.5-0.5B KV shape (the
// store's and replication's benchmark pack: 32,768 tokens in 64-token
// blocks of 768 KiB, 24 layers × 2 KV heads × 64 dims, f16 K and V;
// 512 chunks, 384 MiB) through a real S3 server on loopback, beside its
// peers on the same server in the same run:
//
//   - raw-put: the 512 chunks PUT to a fresh prefix, 8 at a time, nothing
//     else (the peer of upload);
//
//   - upload: tier.Upload into a fresh prefix (HEAD each chunk, read it
//     verified from the store, PUT, then the sealed manifest, conditional);
//
//   - raw-get: the 512 chunk objects GET, 8 at a time, bytes discarded
//     (the peer of install);
//
//   - install: tier.Install into an empty store (manifest, seal, identity,
//     root, each chunk GET, BLAKE3-verified and written with the store's
//     durability, then published);
//
//   - install-nosync: the same into a store opened without fsync (what
//     the local disk's durability costs).
//
//     go test -run '^$' -bench BenchmarkTier32K -benchtime 1x -count 3 ./store/tier
func BenchmarkTier32K(b *testing.B) {
	bp := newBenchPack(b)
	rawPut := func() {
		p := bp.prefix()
		err := bp.parallel(len(bp.chunks), func(i int) error {
			_, err := bp.cl.PutObject(bp.ctx, bp.e.bucket, fmt.Sprintf("%s/chunks/%s", p, bp.m.Chunks[i].ID), bytes.NewReader(bp.chunks[i]),
				int64(len(bp.chunks[i])), minio.PutObjectOptions{DisableMultipart: true})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	upload := func() {
		res, err := bp.opener(b, bp.prefix()).Upload(bp.ctx, bp.src, bp.pid)
		if err != nil || res.ChunksPut != len(bp.chunks) {
			b.Fatalf("upload: %+v, %v", res, err)
		}
	}
	// Every variant once per iteration, interleaved, so that all see the
	// same machine state; each reports its MB/s, and the ratios are taken
	// within the run.
	variants := []struct {
		name string
		f    func()
	}{
		{"raw-put", rawPut}, {"upload", upload}, {"raw-get", func() { bp.rawGet(b) }},
		{"install", func() { bp.install(b, false) }}, {"install-nosync", func() { bp.install(b, true) }},
	}
	spent := make([]time.Duration, len(variants))
	b.ResetTimer()
	for b.Loop() {
		for i, v := range variants {
			t0 := time.Now()
			v.f()
			spent[i] += time.Since(t0)
		}
	}
	rate := func(i int) float64 { return float64(bp.total) * float64(b.N) / spent[i].Seconds() / 1e6 }
	for i, v := range variants {
		b.ReportMetric(rate(i), v.name+"-MB/s")
	}
	b.ReportMetric(rate(1)/rate(0), "upload/raw-put")
	b.ReportMetric(rate(3)/rate(2), "install/raw-get")
	b.ReportMetric(rate(4)/rate(2), "install-nosync/raw-get")
	b.ReportMetric(0, "ns/op")
}

// The benchmark pack's shape (BenchmarkTier32K's comment).
const (
	benchTokens = 32768
	benchChunk  = 768 << 10
)

// benchPack is the benchmark pack, published in a source store and
// uploaded once to a prefix the readers use, on a fresh S3 server.
type benchPack struct {
	e          *env
	ctx        context.Context
	src        *store.Store
	pid        pack.Digest
	id         pack.Identity
	m          *pack.Manifest
	chunks     [][]byte
	cl         *minio.Client
	total      int64
	round      atomic.Int64
	readPrefix string
	rt         *tier.Tier
}

func newBenchPack(b *testing.B) *benchPack {
	bp := &benchPack{e: newEnv(b), ctx: context.Background()}
	bp.src = storetest.Open(b, "", store.Options{Node: "bench"})
	bp.id = packtest.Identity("bench")
	bp.pid = storetest.Publish(b, bp.src, bp.id, nil, packtest.Tokens(1, benchTokens, 150000), benchChunk).Pack
	m, err := bp.src.Manifest(bp.pid)
	if err != nil {
		b.Fatal(err)
	}
	bp.m = m
	bp.chunks = make([][]byte, len(m.Chunks))
	r, err := bp.src.OpenPack(bp.pid, "")
	if err != nil {
		b.Fatal(err)
	}
	for i := range bp.chunks {
		d, err := r.ReadBlock(bp.ctx, i, nil)
		if err != nil {
			b.Fatal(err)
		}
		bp.chunks[i] = d
	}
	r.Close()
	bp.cl = bp.e.srv.Client()
	bp.total = int64(len(bp.chunks)) * benchChunk
	bp.readPrefix = bp.prefix()
	if _, err := bp.opener(b, bp.readPrefix).Upload(bp.ctx, bp.src, bp.pid); err != nil {
		b.Fatal(err)
	}
	bp.rt = bp.opener(b, bp.readPrefix)
	return bp
}

// prefix returns a fresh key prefix.
func (bp *benchPack) prefix() string { return fmt.Sprintf("bench/%d", bp.round.Add(1)) }

// opener opens the tier at prefix p.
func (bp *benchPack) opener(b *testing.B, p string) *tier.Tier {
	cfg := bp.e.config(testKey, "bench")
	cfg.Location.Prefix = p
	t, err := tier.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// parallel calls f for 0 ≤ i < n, 8 at a time (the tier's own
// parallelism), and returns an error of one that failed.
func (bp *benchPack) parallel(n int, f func(i int) error) error {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		fe   error
	)
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					mu.Lock()
					fe = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return fe
}

// rawGet GETs the pack's chunk objects, 8 at a time, discarding the bytes.
func (bp *benchPack) rawGet(b *testing.B) {
	err := bp.parallel(len(bp.chunks), func(i int) error {
		o, err := bp.cl.GetObject(bp.ctx, bp.e.bucket, fmt.Sprintf("%s/chunks/%s", bp.readPrefix, bp.m.Chunks[i].ID), minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer o.Close()
		n, err := io.Copy(io.Discard, o)
		if err == nil && n != benchChunk {
			err = fmt.Errorf("chunk %d: %d bytes", i, n)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

// rawGetCore GETs the pack's chunk objects, 8 at a time, with the
// requests a restore sends (minio.Core, no Object wrapper), each body
// read through one 128 KiB buffer per transfer and discarded: a stricter
// peer than rawGet, whose io.Discard reads 8 KiB at a time.
func (bp *benchPack) rawGetCore(b *testing.B) {
	bufs := make(chan []byte, 8)
	for range 8 {
		bufs <- make([]byte, 128<<10)
	}
	core := minio.Core{Client: bp.cl}
	err := bp.parallel(len(bp.chunks), func(i int) error {
		buf := <-bufs
		defer func() { bufs <- buf }()
		body, _, _, err := core.GetObject(bp.ctx, bp.e.bucket, fmt.Sprintf("%s/chunks/%s", bp.readPrefix, bp.m.Chunks[i].ID), minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer body.Close()
		n := 0
		for {
			k, err := body.Read(buf)
			n += k
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		if n != benchChunk {
			return fmt.Errorf("chunk %d: %d bytes", i, n)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// install installs the pack into an empty store.
func (bp *benchPack) install(b *testing.B, noSync bool) {
	dst, err := store.Open(b.TempDir(), store.Options{Node: "dst", NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	res, err := bp.rt.Install(bp.ctx, dst, bp.pid, bp.id)
	if err != nil || res.ChunksFetched != len(bp.chunks) {
		b.Fatalf("install: %+v, %v", res, err)
	}
}

// admitInto opens an empty store and admits the pack's manifest into it,
// returning the store, the manifest and the chunks to fetch.
func (bp *benchPack) admitInto(b *testing.B) (*store.Store, *pack.Manifest, []pack.Digest) {
	dst, err := store.Open(b.TempDir(), store.Options{Node: "dst"})
	if err != nil {
		b.Fatal(err)
	}
	seal, mb, _, err := bp.rt.Manifest(bp.ctx, bp.pid)
	if err != nil {
		b.Fatal(err)
	}
	m, missing, err := dst.Admit(bp.ctx, store.Offer{Manifest: mb, Seal: seal},
		store.AdmitOptions{Key: testKey, Expect: &bp.id, Source: bp.rt.Source(), Stored: true})
	if err != nil || len(missing) != len(bp.chunks) {
		b.Fatalf("admit: %d missing, %v", len(missing), err)
	}
	return dst, m, missing
}

// installBuffered installs the pack as Install did before it streamed:
// each chunk GET whole into a buffer of its own (one per transfer,
// reused), then hashed and written by store.PutPackChunk; the peer that
// shows what streaming saves.
func (bp *benchPack) installBuffered(b *testing.B) {
	dst, m, missing := bp.admitInto(b)
	defer dst.Close()
	bufs := make(chan []byte, 8)
	for range 8 {
		bufs <- make([]byte, benchChunk)
	}
	err := bp.parallel(len(missing), func(i int) error {
		buf := <-bufs
		defer func() { bufs <- buf }()
		o, err := bp.cl.GetObject(bp.ctx, bp.e.bucket, fmt.Sprintf("%s/chunks/%s", bp.readPrefix, missing[i]), minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer o.Close()
		if _, err := io.ReadFull(o, buf); err != nil {
			return err
		}
		return dst.PutPackChunk(bp.ctx, bp.pid, missing[i], buf, bp.rt.Source())
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := dst.PublishPack(bp.ctx, m, store.PublishOptions{Source: bp.rt.Source()}); err != nil {
		b.Fatal(err)
	}
}

// usage is the CPU time (user and system) this process has used and the
// minor page faults it has taken (pages mapped on first touch).
func usage() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Minflt
}

// BenchmarkTierInstall32K is BenchmarkTier32K's install alone beside its
// peers, in turn each iteration, each under a pprof label (variant=NAME):
//
//   - raw-get: the 512 chunk objects GET, bytes discarded;
//   - install: Tier.Install into an empty store with fsync;
//   - install-nosync: the same into a store without fsync;
//   - install-buffered: each chunk read whole into a buffer, then hashed
//     and written (how Install worked before it streamed).
//
// A CPU profile of the install alone:
//
//	go test -run '^$' -bench BenchmarkTierInstall32K -benchtime 3x -cpuprofile cpu.prof ./store/tier
//	go tool pprof -tagfocus 'variant=install$' -top store/tier.test cpu.prof
//
// It reports each variant's MB/s, the ratios to raw-get, and the CPU
// seconds per iteration of this process (client, hashing, store) and of
// the S3 server (the load average is not reported: note it with uptime).
func BenchmarkTierInstall32K(b *testing.B) {
	bp := newBenchPack(b)
	spent := bp.runVariants(b, []benchVariant{
		{name: "raw-get", f: func() { bp.rawGet(b) }},
		{name: "install", f: func() { bp.install(b, false) }},
		{name: "install-nosync", f: func() { bp.install(b, true) }},
		{name: "install-buffered", f: func() { bp.installBuffered(b) }},
	})
	rate := func(i int) float64 { return bp.rate(b, spent[i]) }
	b.ReportMetric(rate(1)/rate(0), "install/raw-get")
	b.ReportMetric(rate(2)/rate(0), "install-nosync/raw-get")
	b.ReportMetric(rate(3)/rate(0), "install-buffered/raw-get")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkTierRestore32K times what a request waits for on a tier hit,
// beside raw GETs of the same bytes, each variant in turn each iteration
// under a pprof label (variant=NAME):
//
//   - raw-get: the 512 chunk objects GET, 8 at a time, bytes discarded;
//
//   - restore: Tier.Restore into an empty store, the read-through's
//     path: the manifest's checks, each chunk GET, BLAKE3-verified and
//     handed to a consumer (which checks the block order and size),
//     timed to the last block;
//
//   - restore-install: then that restore's local install
//     (Fetched.Install: every chunk GET again, verified, written with
//     fsync, published), which the server runs after the request has its
//     blocks;
//
//   - install: Tier.Install into an empty store with fsync, the
//     read-through's path before the streamed restore;
//
//   - install-restore: then the local restore of the installed pack into
//     the same consumer (store.Restore, from the disk after direct
//     writes), which completed that path's request.
//
//     go test -run '^$' -bench BenchmarkTierRestore32K -benchtime 2x ./store/tier
//
// It reports each variant's MB/s, CPU seconds per iteration (client and
// S3 server), restore/raw-get, and install-path/raw-get: a raw GET's
// time over the install plus its local restore (what the request waited
// for before).
func BenchmarkTierRestore32K(b *testing.B) {
	bp := newBenchPack(b)
	// The consumer checks the order and the size, as the store's
	// restore benchmarks' consumers do nothing: the engine's import of
	// the bytes costs the same after either path.
	next := 0
	consume := func(block int, data []byte) error {
		if block != next%len(bp.chunks) || len(data) != benchChunk {
			return fmt.Errorf("block %d of %d bytes, want block %d", block, len(data), next%len(bp.chunks))
		}
		next++
		return nil
	}
	tokens := bp.m.Tokens
	var (
		fetched *tier.Fetched
		dst     *store.Store
	)
	defer func() {
		if dst != nil {
			dst.Close()
		}
	}()
	fresh := func() {
		if dst != nil {
			dst.Close()
		}
		var err error
		if dst, err = store.Open(b.TempDir(), store.Options{Node: "dst"}); err != nil {
			b.Fatal(err)
		}
	}
	restore := func() {
		n, f, err := bp.rt.Restore(bp.ctx, dst, tier.RestoreRequest{Pack: bp.pid, Identity: bp.id, Tokens: tokens}, consume)
		if err != nil || n != benchTokens {
			b.Fatalf("restore: %d tokens, %v", n, err)
		}
		fetched = f
	}
	// An empty store is opened before each of the two paths, untimed.
	spent := bp.runVariants(b, []benchVariant{
		{name: "raw-get", f: func() { bp.rawGetCore(b) }},
		{name: "restore", f: restore, before: fresh},
		{name: "restore-install", f: func() {
			res, err := fetched.Install(bp.ctx)
			if err != nil || !res.New || res.ChunksFetched != len(bp.chunks) {
				b.Fatalf("install after restore: %+v, %v", res, err)
			}
		}},
		{name: "install", f: func() {
			res, err := bp.rt.Install(bp.ctx, dst, bp.pid, bp.id)
			if err != nil || res.ChunksFetched != len(bp.chunks) {
				b.Fatalf("install: %+v, %v", res, err)
			}
		}, before: fresh},
		{name: "install-restore", f: func() {
			n, err := dst.Restore(bp.ctx, bp.id, nil, tokens, consume)
			if err != nil || n != benchTokens {
				b.Fatalf("local restore: %d tokens, %v", n, err)
			}
		}},
		{name: "raw-get-object", f: func() { bp.rawGet(b) }},
	})
	rate := func(d time.Duration) float64 { return bp.rate(b, d) }
	b.ReportMetric(rate(spent[1])/rate(spent[0]), "restore/raw-get")
	b.ReportMetric(rate(spent[3])/rate(spent[0]), "install/raw-get")
	b.ReportMetric(rate(spent[3]+spent[4])/rate(spent[0]), "install-path/raw-get")
	b.ReportMetric(rate(spent[1])/rate(spent[5]), "restore/raw-get-object")
	b.ReportMetric(0, "ns/op")
}

// benchVariant is one timed variant of a benchmark; before, when set,
// runs untimed just before it.
type benchVariant struct {
	name   string
	f      func()
	before func()
}

// runVariants runs every variant once per iteration, in turn, each
// under a pprof label (variant=NAME), and reports each one's MB/s and
// CPU seconds per iteration of this process (client, hashing, store) and
// of the S3 server, and this process's minor page faults (-minflt). It
// returns the time each variant took in all.
func (bp *benchPack) runVariants(b *testing.B, vs []benchVariant) []time.Duration {
	spent := make([]time.Duration, len(vs))
	cpu := make([]time.Duration, len(vs))
	srvCPU := make([]time.Duration, len(vs))
	faults := make([]int64, len(vs))
	b.ResetTimer()
	for b.Loop() {
		for i, v := range vs {
			if v.before != nil {
				v.before()
			}
			c0, f0 := usage()
			s0, t0 := bp.e.srv.CPUTime(), time.Now()
			pprof.Do(bp.ctx, pprof.Labels("variant", v.name), func(context.Context) { v.f() })
			spent[i] += time.Since(t0)
			c1, f1 := usage()
			cpu[i] += c1 - c0
			faults[i] += f1 - f0
			srvCPU[i] += bp.e.srv.CPUTime() - s0
		}
	}
	for i, v := range vs {
		b.ReportMetric(bp.rate(b, spent[i]), v.name+"-MB/s")
		b.ReportMetric(cpu[i].Seconds()/float64(b.N), v.name+"-cpu-s")
		b.ReportMetric(srvCPU[i].Seconds()/float64(b.N), v.name+"-server-cpu-s")
		b.ReportMetric(float64(faults[i])/float64(b.N), v.name+"-minflt")
	}
	return spent
}

// rate is the pack's MB/s over b.N iterations that took d.
func (bp *benchPack) rate(b *testing.B, d time.Duration) float64 {
	return float64(bp.total) * float64(b.N) / d.Seconds() / 1e6
}
