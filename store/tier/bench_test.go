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

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
	variants := []struct {
		name string
		f    func()
	}{
		{"raw-get", func() { bp.rawGet(b) }},
		{"install", func() { bp.install(b, false) }},
		{"install-nosync", func() { bp.install(b, true) }},
		{"install-buffered", func() { bp.installBuffered(b) }},
	}
	spent := make([]time.Duration, len(variants))
	cpu := make([]time.Duration, len(variants))
	srvCPU := make([]time.Duration, len(variants))
	b.ResetTimer()
	for b.Loop() {
		for i, v := range variants {
			c0, s0, t0 := cpuTime(), bp.e.srv.CPUTime(), time.Now()
			pprof.Do(bp.ctx, pprof.Labels("variant", v.name), func(context.Context) { v.f() })
			spent[i] += time.Since(t0)
			cpu[i] += cpuTime() - c0
			srvCPU[i] += bp.e.srv.CPUTime() - s0
		}
	}
	rate := func(i int) float64 { return float64(bp.total) * float64(b.N) / spent[i].Seconds() / 1e6 }
	for i, v := range variants {
		b.ReportMetric(rate(i), v.name+"-MB/s")
		b.ReportMetric(cpu[i].Seconds()/float64(b.N), v.name+"-cpu-s")
		b.ReportMetric(srvCPU[i].Seconds()/float64(b.N), v.name+"-server-cpu-s")
	}
	b.ReportMetric(rate(1)/rate(0), "install/raw-get")
	b.ReportMetric(rate(2)/rate(0), "install-nosync/raw-get")
	b.ReportMetric(rate(3)/rate(0), "install-buffered/raw-get")
	b.ReportMetric(0, "ns/op")
}
