package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// The -tier mode measures the fleet tier (docs/tier.md) with real
// `muser serve` processes and a real S3 server (versitygw, installed by
// scripts/s3server.sh) on loopback. Two nodes of one cluster, separate
// homes, no peer link, one bucket:
//
//   - A (--tier): the prompt cold (a local prefill, the peer); A then
//     stops, which flushes its upload of the new pack into the bucket;
//   - B (--tier, an empty store): once its index holds A's pack, the same
//     prompt: the read-through installs the pack from the bucket
//     (verified) and B computes the last prompt token and one output
//     token (the tier hit); then three times more from B's own store
//     (the local warm hit).

const (
	s3Access = "servebench-access"
	s3Secret = "servebench-secret-0123456789abcd"
)

type tierRow struct {
	depth                int
	cold, hit            time.Duration
	warm                 []time.Duration
	hitCached, warmCache int
	upload               time.Duration
	packBytes            int64
	hitTimings           serverTimings // B's server timings of the tier hit
}

func runTier(bin, modelPath, s3bin string, depths []int, threads int) error {
	tmp, err := os.MkdirTemp("", "servebench-tier-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "muser")
		logf("building %s", bin)
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/muser").CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/muser (run from the repository root, or give -muser): %v: %s", err, out)
		}
	}
	// The S3 server.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	s3dir := filepath.Join(tmp, "s3")
	if err := os.MkdirAll(s3dir, 0o755); err != nil {
		return err
	}
	srv := exec.Command(s3bin, "--access", s3Access, "--secret", s3Secret, "--port", addr, "--quiet", "posix", s3dir)
	if err := srv.Start(); err != nil {
		return fmt.Errorf("starting the S3 server %s (scripts/s3server.sh installs it): %w", s3bin, err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	endpoint := "http://" + addr
	for i := 0; ; i++ {
		resp, err := http.Get(endpoint + "/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if i > 500 {
			return fmt.Errorf("the S3 server does not answer on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cl, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(s3Access, s3Secret, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupPath})
	if err != nil {
		return err
	}
	if err := cl.MakeBucket(context.Background(), "servebench", minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		return err
	}
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": s3Access,
		"AWS_SECRET_ACCESS_KEY": s3Secret, "AWS_REGION": "us-east-1"} {
		os.Setenv(k, v)
	}

	maxDepth := 512
	for _, d := range depths {
		maxDepth = max(maxDepth, d)
	}
	ctx := maxDepth + 64
	rng := rand.New(rand.NewPCG(11, 11))
	fmt.Printf("Model: %s (%s), %d engine threads per server, %d CPUs, S3 server %s, muser binary %s; load average at start: %s\n\n",
		filepath.Base(modelPath), size(modelPath), threads, runtimeCPUs(), filepath.Base(s3bin), bin, loadavg())
	var rows []tierRow
	for _, d := range depths {
		// Fresh homes per depth: A and B in a cluster of their own.
		dir := filepath.Join(tmp, fmt.Sprintf("d%d", d))
		homeA, homeB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		bundle := filepath.Join(dir, "b.bundle")
		for _, args := range [][]string{
			{"cluster", "init", "--home", homeA, "--name", "a"},
			{"node", "enroll", "--home", homeA, "-o", bundle, "b"},
			{"node", "join", "--home", homeB, bundle},
		} {
			if err := muserCmd(bin, args...); err != nil {
				return err
			}
		}
		url := fmt.Sprintf("s3://servebench/d%d", d)
		prompt := make([]int32, d)
		for i := range prompt {
			prompt[i] = int32(3 + rng.IntN(150000))
		}
		r := tierRow{depth: d}
		a, err := startServe(bin, "a", homeA, modelPath, ctx, threads, "--tier", url)
		if err != nil {
			return err
		}
		logf("depth %d: cold on A", d)
		if r.cold, _, err = (&bench{url: a.url}).firstToken(prompt); err != nil {
			a.stop()
			return err
		}
		if err := a.waitPublished(); err != nil {
			return err
		}
		t0 := time.Now()
		if err := a.stop(); err != nil { // flushes the upload
			return err
		}
		r.upload = time.Since(t0)
		for o := range cl.ListObjects(context.Background(), "servebench", minio.ListObjectsOptions{Prefix: fmt.Sprintf("d%d/chunks/", d), Recursive: true}) {
			r.packBytes += o.Size
		}
		logf("depth %d: cold %v; A stopped after %v (upload flushed, %d chunk bytes in the bucket)", d, r.cold, r.upload, r.packBytes)
		b, err := startServe(bin, "b", homeB, modelPath, ctx, threads, "--tier", url, "--tier-refresh", "1s")
		if err != nil {
			return err
		}
		if err := waitMetric(b.url, "muser_tier_index_packs{", 1); err != nil {
			b.stop()
			return err
		}
		bb := &bench{url: b.url}
		if r.hit, r.hitCached, err = bb.firstToken(prompt); err != nil {
			b.stop()
			return err
		}
		r.hitTimings = bb.timings
		logf("depth %d: tier hit %v, %d cached; %s", d, r.hit, r.hitCached, bb.timings)
		if err := b.waitPublished(); err != nil {
			return err
		}
		for range 3 {
			t, c, err := bb.firstToken(prompt)
			if err != nil {
				b.stop()
				return err
			}
			r.warm, r.warmCache = append(r.warm, t), c
		}
		if err := b.stop(); err != nil {
			return err
		}
		rows = append(rows, r)
	}
	fmt.Println("### Time to first token: fleet tier hit vs cold prefill (streamed /v1/completions, prompt as token ids)")
	fmt.Println()
	fmt.Println("| prompt tokens | KV in the bucket | cold prefill (A) | tier hit (B, empty store) | local warm hit (B) | cached (tier / warm) | **cold / tier hit** | tier hit / warm |")
	fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		w := median(r.warm)
		fmt.Printf("| %d | %.1f MiB | %s | %s | %s | %d / %d | **%.1f×** | %.1f× |\n", r.depth, float64(r.packBytes)/(1<<20),
			dur(r.cold), dur(r.hit), dur(w), r.hitCached, r.warmCache, r.cold.Seconds()/r.hit.Seconds(), r.hit.Seconds()/w.Seconds())
	}
	fmt.Println()
	for _, r := range rows {
		fmt.Printf("Tier hit at %d tokens, B's %s.\n", r.depth, r.hitTimings)
	}
	fmt.Printf("\nLoad average at the end: %s\n", loadavg())
	return nil
}

// waitMetric waits until a sample whose line starts with prefix reaches
// at least want.
func waitMetric(url, prefix string, want float64) error {
	for range 3000 {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, prefix) {
				var v float64
				if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil && v >= want {
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: %s never reached %v", url, prefix, want)
}
