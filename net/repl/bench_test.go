package repl

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/muserhq/muser/net/cluster/clustertest"
	"github.com/muserhq/muser/net/repl/repltest"
	"github.com/muserhq/muser/net/transport"
	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/quic-go/quic-go"
)

// Benchmark geometry: a Qwen2.5-0.5B-shaped KV (24 layers × 2 KV heads ×
// 64 dims, f16 K and V: 12 KiB a token), 64-token blocks of 768 KiB, a
// 32,768-token pack of 384 MiB (docs/benchmarks.md, "Replication").
const (
	benchBlock    = 64
	benchChunk    = 768 << 10
	benchTokens   = 32768
	benchPackSize = benchTokens / benchBlock * benchChunk
)

var benchID = packtest.Identity("bench-qwen2.5-0.5b")

func benchTokensFor(n int) []int32 { return packtest.Tokens(4242, n, 151000) }

// benchNode is a node for benchmarks: a store (optionally without fsync)
// and a listening replication node.
func benchNode(b *testing.B, cn *clustertest.Node, dir string, noSync bool, cfg Config) *node {
	b.Helper()
	s, err := store.Open(dir, store.Options{BlockTokens: benchBlock, Node: cn.Name, NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	cfg.Store, cfg.Cluster, cfg.RevalidateEvery = s, cn.Cluster, -1
	rn, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := rn.Listen("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	go rn.Serve(context.Background())
	return &node{Node: cn, store: s, repl: rn}
}

func (n *node) close() {
	n.repl.Close()
	n.store.Close()
}

// BenchmarkPush measures a 384 MiB pack crossing loopback: a full push
// and a full pull from one store to another (a new receiving store each
// time), the same bytes over this transport without stores (quic-raw:
// chunk frames on the same number of streams, same TLS configuration, the
// reader discarding), and raw TLS 1.3 over TCP with the same certificates
// (one connection, 768 KiB writes, the reader discarding). Run with
// -benchtime=2x; compare MB/s and CPU seconds per GiB
// (docs/benchmarks.md, "Replication").
func BenchmarkPush(b *testing.B) {
	streams := envInt("MUSER_BENCH_STREAMS", DefaultStreams)
	// MUSER_BENCH_CONNS spreads quic-raw's streams over that many QUIC
	// connections (docs/benchmarks.md: measured and rejected for pushes).
	conns := envInt("MUSER_BENCH_CONNS", 1)
	nodes := clustertest.New(b, "sender", "receiver")
	root := b.TempDir()

	b.Run("tls-tcp", func(b *testing.B) {
		payload := benchPayload()
		b.SetBytes(int64(len(payload)))
		cpu := startCPU(b)
		for range b.N {
			benchTLS(b, nodes[0], nodes[1], payload)
		}
		cpu.report(int64(len(payload)))
	})
	b.Run("quic-raw", func(b *testing.B) {
		payload := benchPayload()
		b.SetBytes(int64(len(payload)))
		cpu := startCPU(b)
		for range b.N {
			benchQUICRaw(b, nodes[0], nodes[1], payload, conns, max(1, streams/conns))
		}
		cpu.report(int64(len(payload)))
	})
	// store-only: the store work a push does, without the network: the
	// sender's verified restore of every chunk and the receiver's verified
	// PutChunk of each into an empty store (no fsync), in one goroutine.
	b.Run("store-only", func(b *testing.B) {
		src, err := store.Open(filepath.Join(root, "store-only-src"), store.Options{BlockTokens: benchBlock, NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		defer src.Close()
		tokens := benchTokensFor(benchTokens)
		res, err := src.PublishPrefix(context.Background(), benchID, []byte("t"), tokens,
			storetest.KV(benchID, []byte("t"), tokens, benchBlock, benchChunk))
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(benchPackSize)
		b.ResetTimer()
		var cpuTotal time.Duration
		for i := range b.N {
			b.StopTimer()
			dir := filepath.Join(root, "store-only-dst", string(rune('a'+i)))
			dst, err := store.Open(dir, store.Options{BlockTokens: benchBlock, NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			c0 := cpuTime()
			b.StartTimer()
			_, err = src.RestorePack(context.Background(), store.RestoreRequest{Pack: res.Pack, Identity: benchID},
				func(_ int, kv []byte) error {
					return dst.PutChunk(context.Background(), pack.ChunkID(kv), kv, "bench")
				})
			b.StopTimer()
			cpuTotal += cpuTime() - c0
			if err != nil {
				b.Fatal(err)
			}
			dst.Close()
			os.RemoveAll(dir)
			b.StartTimer()
		}
		b.ReportMetric(cpuTotal.Seconds()/float64(b.N)/(float64(benchPackSize)/(1<<30)), "cpu-s/GiB")
	})
	for _, dir := range []string{"push", "pull"} {
		for _, sync := range []bool{false, true} {
			name := dir + "-nosync"
			if sync {
				name = dir + "-fsync"
			}
			b.Run(name, func(b *testing.B) {
				if err := os.MkdirAll(filepath.Join(root, name), 0o700); err != nil {
					b.Fatal(err)
				}
				benchTransfer(b, nodes, filepath.Join(root, name), dir == "pull", sync, streams)
			})
		}
	}
}

// benchTransfer moves the 384 MiB bench pack from nodes[0] to a new
// receiving store of nodes[1] b.N times: pushed by the sender, or pulled
// by the receiver. The receiving store has its 256 chunk fan-out
// directories already, as has any store that received before
// (MUSER_BENCH_NEWSTORE=1 leaves them out: the first push into a new
// store also creates them). Every receiving store is kept until the
// benchmark ends (b.TempDir), so no transfer runs just after the deletion
// of a previous one's files (on ext4, creating files where many were
// just deleted costs far more CPU), and the page cache is written back
// (sync) before each transfer.
func benchTransfer(b *testing.B, nodes []*clustertest.Node, root string, pull, sync bool, streams int) {
	newStore := envInt("MUSER_BENCH_NEWSTORE", 0) == 1
	// testing calls a sub-benchmark's function more than once (b.N = 1
	// first): each call starts from new stores.
	root, err := os.MkdirTemp(root, "run")
	if err != nil {
		b.Fatal(err)
	}
	sender := benchNode(b, nodes[0], filepath.Join(root, "sender"), true, Config{Streams: streams})
	defer sender.close()
	tokens := benchTokensFor(benchTokens)
	res, err := sender.store.PublishPrefix(context.Background(), benchID, []byte("t"), tokens,
		storetest.KV(benchID, []byte("t"), tokens, benchBlock, benchChunk))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchPackSize)
	b.ResetTimer()
	var cpuTotal time.Duration
	for i := range b.N {
		b.StopTimer()
		dir := filepath.Join(root, "receiver", strconv.Itoa(i))
		if !newStore {
			for d := range 256 {
				if err := os.MkdirAll(filepath.Join(dir, "chunks", hex.EncodeToString([]byte{byte(d)})), 0o700); err != nil {
					b.Fatal(err)
				}
			}
		}
		recv := benchNode(b, nodes[1], dir, !sync, Config{})
		if pull {
			clustertest.Admit(b, nodes[1], "sender", sender.repl.Addr().String())
		} else {
			clustertest.Admit(b, nodes[0], "receiver", recv.repl.Addr().String())
		}
		syscall.Sync()
		c0 := cpuTime()
		b.StartTimer()
		var r Result
		if pull {
			r, err = recv.repl.Pull(context.Background(), "sender", res.Pack.String())
		} else {
			r, err = sender.repl.Push(context.Background(), "receiver", res.Pack)
		}
		b.StopTimer()
		cpuTotal += cpuTime() - c0
		if err != nil {
			b.Fatal(err)
		}
		if r.MovedBytes != benchPackSize {
			b.Fatalf("moved %d bytes, want %d", r.MovedBytes, benchPackSize)
		}
		if r.WireBytes > 0 {
			b.ReportMetric(float64(r.LostBytes)/float64(r.WireBytes)*100, "%resent")
		}
		recv.close()
		b.StartTimer()
	}
	b.ReportMetric(cpuTotal.Seconds()/float64(b.N)/(float64(benchPackSize)/(1<<30)), "cpu-s/GiB")
}

// cpuTime returns the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type cpuMeter struct {
	b     *testing.B
	start time.Duration
}

func startCPU(b *testing.B) cpuMeter { return cpuMeter{b, cpuTime()} }

// report adds the CPU seconds both ends spent per GiB moved: a figure a
// loaded machine disturbs less than wall time.
func (m cpuMeter) report(bytesPerOp int64) {
	used := cpuTime() - m.start
	m.b.ReportMetric(used.Seconds()/float64(m.b.N)/(float64(bytesPerOp)/(1<<30)), "cpu-s/GiB")
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

var (
	payloadOnce sync.Once
	payload     []byte
)

func benchPayload() []byte {
	payloadOnce.Do(func() {
		payload = make([]byte, benchPackSize)
		for i := 0; i < len(payload); i += benchChunk {
			copy(payload[i:], packtest.KV(pack.Digest{byte(i >> 20), byte(i >> 12)}, benchChunk))
		}
	})
	return payload
}

// benchTLS sends payload over TLS 1.3 on TCP loopback and returns when the
// reader has it all.
func benchTLS(b *testing.B, from, to *clustertest.Node, payload []byte) {
	sc, err := to.TLS(b).Server()
	if err != nil {
		b.Fatal(err)
	}
	cc, err := from.TLS(b).Client(to.Name)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", sc)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- -1
			return
		}
		defer c.Close()
		n, _ := io.CopyBuffer(io.Discard, c, make([]byte, 1<<20))
		done <- n
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), cc)
	if err != nil {
		b.Fatal(err)
	}
	for off := 0; off < len(payload); off += benchChunk {
		if _, err := c.Write(payload[off : off+benchChunk]); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	if n := <-done; n != int64(len(payload)) {
		b.Fatalf("TLS reader got %d bytes, want %d", n, len(payload))
	}
}

// benchQUICRaw sends payload over conns QUIC connections of this
// transport, in chunk frames on streams parallel unidirectional streams per
// connection, the reader discarding: the transport's ceiling without
// stores.
func benchQUICRaw(b *testing.B, from, to *clustertest.Node, payload []byte, conns, streams int) {
	srv, err := transport.Listen("127.0.0.1:0", transport.Config{TLS: to.TLS(b), RevalidateEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	cli, err := transport.NewDialer(transport.Config{TLS: from.TLS(b), RevalidateEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	got := make(chan int64, 1)
	go func() {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total int64
		)
		for range conns {
			c, err := srv.Accept(ctx)
			if err != nil {
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range streams {
					rs, err := c.AcceptUniStream(ctx)
					if err != nil {
						break
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						n, _ := io.CopyBuffer(io.Discard, rs, make([]byte, 1<<20))
						mu.Lock()
						total += n
						mu.Unlock()
					}()
				}
			}()
		}
		wg.Wait()
		got <- total
	}()
	var sts []*quic.SendStream
	for range conns {
		c, err := cli.Dial(ctx, to.Name, srv.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(wire.CodeOK, "")
		for range streams {
			st, err := c.OpenUniStream(ctx)
			if err != nil {
				b.Fatal(err)
			}
			sts = append(sts, st)
		}
	}
	var wg sync.WaitGroup
	per := len(payload) / benchChunk / len(sts)
	for s, st := range sts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lo := s * per * benchChunk
			hi := lo + per*benchChunk
			if s == len(sts)-1 {
				hi = len(payload)
			}
			for off := lo; off < hi; off += benchChunk {
				h, _ := wire.AppendChunkHeader(nil, pack.Digest{}, benchChunk)
				st.Write(h)
				st.Write(payload[off : off+benchChunk])
			}
			st.Close()
		}()
	}
	wg.Wait()
	want := int64(len(payload)) + int64(len(payload)/benchChunk*wire.ChunkHeaderSize)
	if n := <-got; n != want {
		b.Fatalf("QUIC reader got %d bytes, want %d", n, want)
	}
}

// BenchmarkRemotePrefill measures the consumer's side of disaggregated
// prefill when the producer already holds the prefix: request, the
// producer's cache hit, the transfer of every block, verification and
// publication, then the verified restore a server does before decoding.
// The peer is the same restore when the consumer already holds the
// prefix (a local cache hit). Qwen2.5-0.5B-shaped KV (12 KiB a token).
func BenchmarkRemotePrefill(b *testing.B) {
	nodes := clustertest.New(b, "producer", "consumer")
	root := b.TempDir()
	for _, n := range []int{2048, 8192} {
		tokens := benchTokensFor(n)
		salt := []byte("tenant")
		b.Run(fmtInt("tokens=", n)+"/remote", func(b *testing.B) {
			var prod *repltest.SyntheticPrefiller
			producer := benchNode(b, nodes[0], filepath.Join(root, fmtInt("p", n)), false, Config{})
			prod = &repltest.SyntheticPrefiller{Store: producer.store, Engine: benchID, ChunkSize: benchChunk}
			producer.repl.cfg.Prefiller = prod
			defer producer.close()
			if _, err := prod.Prefill(context.Background(), benchID, salt, tokens); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(n / benchBlock * benchChunk))
			b.ResetTimer()
			var total time.Duration
			for i := range b.N {
				b.StopTimer()
				dir := filepath.Join(root, fmtInt("c", n), string(rune('a'+i)))
				cons := benchNode(b, nodes[1], dir, false, Config{})
				clustertest.Admit(b, nodes[1], "producer", producer.repl.Addr().String())
				b.StartTimer()
				start := time.Now()
				if _, err := cons.repl.Prefill(context.Background(), "producer", benchID, salt, tokens, 0); err != nil {
					b.Fatal(err)
				}
				got, err := cons.store.Restore(context.Background(), benchID, salt, tokens, func(int, []byte) error { return nil })
				if err != nil || got != n {
					b.Fatalf("restore %d of %d tokens: %v", got, n, err)
				}
				total += time.Since(start)
				b.StopTimer()
				cons.close()
				os.RemoveAll(dir)
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()*1000/float64(b.N), "ms/prefix")
		})
		b.Run(fmtInt("tokens=", n)+"/local-restore", func(b *testing.B) {
			s, err := store.Open(filepath.Join(root, fmtInt("l", n)), store.Options{BlockTokens: benchBlock})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if _, err := s.PublishPrefix(context.Background(), benchID, salt, tokens,
				storetest.KV(benchID, salt, tokens, benchBlock, benchChunk)); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(n / benchBlock * benchChunk))
			b.ResetTimer()
			for range b.N {
				got, err := s.Restore(context.Background(), benchID, salt, tokens, func(int, []byte) error { return nil })
				if err != nil || got != n {
					b.Fatalf("restore %d of %d tokens: %v", got, n, err)
				}
			}
		})
	}
}

func fmtInt(prefix string, n int) string { return prefix + strconv.Itoa(n) }
