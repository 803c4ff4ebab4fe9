package tier_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
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
	const (
		tokens    = 32768
		blockToks = 64
		chunkSize = 768 << 10
	)
	e := newEnv(b)
	ctx := context.Background()
	src := storetest.Open(b, "", store.Options{Node: "bench"})
	id := packtest.Identity("bench")
	pid := storetest.Publish(b, src, id, nil, packtest.Tokens(1, tokens, 150000), chunkSize).Pack
	m, err := src.Manifest(pid)
	if err != nil {
		b.Fatal(err)
	}
	chunks := make([][]byte, len(m.Chunks))
	r, err := src.OpenPack(pid, "")
	if err != nil {
		b.Fatal(err)
	}
	for i := range chunks {
		d, err := r.ReadBlock(ctx, i, nil)
		if err != nil {
			b.Fatal(err)
		}
		chunks[i] = d
	}
	r.Close()
	cl := e.srv.Client()
	total := int64(len(chunks)) * chunkSize
	var round atomic.Int64
	prefix := func() string { return fmt.Sprintf("bench/%d", round.Add(1)) }
	parallel := func(n int, f func(i int) error) error {
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
	opener := func(p string) *tier.Tier {
		cfg := e.config(testKey, "bench")
		cfg.Location.Prefix = p
		t, err := tier.Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		return t
	}
	// The pack in the bucket once, for the readers.
	readPrefix := prefix()
	if _, err := opener(readPrefix).Upload(ctx, src, pid); err != nil {
		b.Fatal(err)
	}
	rt := opener(readPrefix)
	rawPut := func() {
		p := prefix()
		err := parallel(len(chunks), func(i int) error {
			_, err := cl.PutObject(ctx, e.bucket, fmt.Sprintf("%s/chunks/%s", p, m.Chunks[i].ID), bytes.NewReader(chunks[i]),
				int64(len(chunks[i])), minio.PutObjectOptions{DisableMultipart: true})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	upload := func() {
		res, err := opener(prefix()).Upload(ctx, src, pid)
		if err != nil || res.ChunksPut != len(chunks) {
			b.Fatalf("upload: %+v, %v", res, err)
		}
	}
	rawGet := func() {
		err := parallel(len(chunks), func(i int) error {
			o, err := cl.GetObject(ctx, e.bucket, fmt.Sprintf("%s/chunks/%s", readPrefix, m.Chunks[i].ID), minio.GetObjectOptions{})
			if err != nil {
				return err
			}
			defer o.Close()
			n, err := io.Copy(io.Discard, o)
			if err == nil && n != chunkSize {
				err = fmt.Errorf("chunk %d: %d bytes", i, n)
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	install := func(noSync bool) func() {
		return func() {
			dst, err := store.Open(b.TempDir(), store.Options{Node: "dst", NoSync: noSync})
			if err != nil {
				b.Fatal(err)
			}
			defer dst.Close()
			res, err := rt.Install(ctx, dst, pid, id)
			if err != nil || res.ChunksFetched != len(chunks) {
				b.Fatalf("install: %+v, %v", res, err)
			}
		}
	}
	// Every variant once per iteration, interleaved, so that all see the
	// same machine state; each reports its MB/s, and the ratios are taken
	// within the run.
	variants := []struct {
		name string
		f    func()
	}{{"raw-put", rawPut}, {"upload", upload}, {"raw-get", rawGet}, {"install", install(false)}, {"install-nosync", install(true)}}
	spent := make([]time.Duration, len(variants))
	b.ResetTimer()
	for b.Loop() {
		for i, v := range variants {
			t0 := time.Now()
			v.f()
			spent[i] += time.Since(t0)
		}
	}
	rate := func(i int) float64 { return float64(total) * float64(b.N) / spent[i].Seconds() / 1e6 }
	for i, v := range variants {
		b.ReportMetric(rate(i), v.name+"-MB/s")
	}
	b.ReportMetric(rate(1)/rate(0), "upload/raw-put")
	b.ReportMetric(rate(3)/rate(2), "install/raw-get")
	b.ReportMetric(rate(4)/rate(2), "install-nosync/raw-get")
	b.ReportMetric(0, "ns/op")
}
