package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/store/tier/tiertest"
)

// TestE2ETier: two `muser serve` nodes of one cluster, with separate
// homes and no peer link, share one bucket of a real S3 server: B answers
// A's prompt from the tier (cached tokens, the same choices and
// log-probabilities byte for byte). Then the faults: a bit-flipped chunk
// and a truncated one are refused with receipts and the request is
// prefilled locally with the same answer; `pack verify --tier` names each
// fault; wrong credentials, a missing bucket and a node with another key
// keep serving locally with a log line.
func TestE2ETier(t *testing.T) {
	e := newE2E(t)
	srv := tiertest.Start(t)
	bucket := srv.Bucket()
	srv.Env(t)
	url := "s3://" + bucket + "/fleet"

	dir := t.TempDir()
	home := func(n string) string { return filepath.Join(dir, n) }
	e.must("cluster", "init", "--home", home("a"), "--name", "a")
	for _, n := range []string{"b", "c", "d"} {
		bundle := filepath.Join(dir, n+".bundle")
		e.must("node", "enroll", "--home", home("a"), "-o", bundle, n)
		e.must("node", "join", "--home", home(n), bundle)
	}

	req := fmt.Sprintf(`{"prompt":%q,"max_tokens":8,"temperature":0,"logprobs":2}`, infertest.Story(5, 150))
	a := e.serve("a", home("a"), "--tier", url)
	want, cached := a.generate("/v1/completions", req)
	if cached != 0 {
		t.Fatalf("A's first request: %d cached tokens, want 0", cached)
	}
	a.stop() // the shutdown flushes the upload queue
	if log := a.stderr.String(); !strings.Contains(log, "pack uploaded to the tier") {
		t.Fatalf("A never uploaded its pack:\n%s", log)
	}
	var listed []struct {
		Pack   string `json:"pack"`
		Tokens int    `json:"tokens"`
		Err    string `json:"error"`
	}
	out := e.must("pack", "ls", "--home", home("b"), "--tier", url, "--json")
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) == 0 {
		t.Fatalf("pack ls --tier: %q (%v), want A's packs", out, err)
	}
	e.must("pack", "verify", "--home", home("b"), "--tier", url)

	// B: a cold node that never talked to A.
	b := e.serve("b", home("b"), "--tier", url)
	got, cached := b.generate("/v1/completions", req)
	if cached == 0 {
		t.Errorf("B served A's prompt with 0 cached tokens, want the tier's blocks")
	}
	if got != want {
		t.Errorf("B's answer differs from A's:\n got %s\nwant %s", got, want)
	}
	if v := b.metric("muser_tier_reads_total", `outcome="hit"`); v != 1 {
		t.Errorf("B's muser_tier_reads_total{outcome=\"hit\"} = %v, want 1", v)
	}
	b.stop()
	e.must("pack", "verify", "--home", home("b"))

	// Damage the bucket: flip a bit in one chunk, truncate another.
	cl := srv.Client()
	ctx := context.Background()
	var chunks []string
	for o := range cl.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "fleet/chunks/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		chunks = append(chunks, o.Key)
	}
	if len(chunks) < 2 {
		t.Fatalf("the bucket holds %d chunks, want at least 2", len(chunks))
	}
	damage := func(key string, f func([]byte) []byte) {
		obj, err := cl.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		data := f(readAll(t, obj))
		if _, err := cl.PutObject(ctx, bucket, key, strings.NewReader(string(data)), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	damage(chunks[0], func(b []byte) []byte { b[len(b)/2] ^= 4; return b })
	damage(chunks[1], func(b []byte) []byte { return b[:len(b)/3] })
	code, vout, _ := e.muser("pack", "verify", "--home", home("c"), "--tier", url)
	if code != exitFailure || !strings.Contains(vout, "digest") || !strings.Contains(vout, "truncated") ||
		!strings.Contains(vout, filepath.Base(chunks[0])) || !strings.Contains(vout, filepath.Base(chunks[1])) {
		t.Fatalf("pack verify --tier of a damaged bucket: exit %d, want %d naming both chunks:\n%s", code, exitFailure, vout)
	}
	// C: refuses what the tier holds, with a receipt, and answers the
	// same from a local prefill.
	c := e.serve("c", home("c"), "--tier", url)
	got, cached = c.generate("/v1/completions", req)
	if got != want || cached != 0 {
		t.Errorf("C with a damaged tier: cached %d, answer %s; want 0 and A's %s", cached, got, want)
	}
	if v := c.metric("muser_tier_reads_total", `outcome="refused"`); v != 1 {
		t.Errorf("C's muser_tier_reads_total{outcome=\"refused\"} = %v, want 1", v)
	}
	c.stop()
	rout := e.must("receipts", "ls", "--home", home("c"), "--json")
	if !strings.Contains(rout, "tier:"+url) {
		t.Errorf("C's receipts do not name the tier:\n%s", rout)
	}
	e.must("pack", "verify", "--home", home("c"))

	// Wrong credentials, a missing bucket: D serves locally, saying why.
	for _, tc := range []struct {
		name, url, secret string
	}{
		{"wrong credentials", url, "not-the-secret"},
		{"missing bucket", "s3://no-such-bucket-muser/fleet", tiertest.SecretKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_SECRET_ACCESS_KEY", tc.secret)
			d := e.serve("d", home("d"), "--tier", tc.url)
			got, _ := d.generate("/v1/completions", req)
			if got != want {
				t.Errorf("D's answer differs from A's:\n got %s\nwant %s", got, want)
			}
			d.stop()
			if log := d.stderr.String(); !strings.Contains(log, "tier unavailable") {
				t.Errorf("D's log does not say the tier is unavailable:\n%s", log)
			}
			os.RemoveAll(filepath.Join(home("d"), "packs")) // the next case starts cold
		})
	}
	// A node outside the cluster with its own key reads none of A's
	// manifests.
	keyFile := filepath.Join(dir, "tier.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	x := e.serve("x", home("x"), "--tier", url, "--tier-key", keyFile)
	got, cached = x.generate("/v1/completions", req)
	if got != want || cached != 0 {
		t.Errorf("X with a foreign key: cached %d, answer %s; want 0 and A's", cached, got)
	}
	x.stop()
	if log := x.stderr.String(); !strings.Contains(log, "tier manifest ignored") {
		t.Errorf("X's log does not say it ignored A's manifests:\n%s", log)
	}
	// Without a cluster or --tier-key, --tier is a usage error.
	if code, _, errOut := e.muser("pack", "ls", "--home", home("y"), "--tier", url); code != exitUsage || !strings.Contains(errOut, "cluster") {
		t.Errorf("pack ls --tier outside a cluster: exit %d (%s), want %d naming the cluster", code, errOut, exitUsage)
	}
}

func readAll(t *testing.T, o *minio.Object) []byte {
	t.Helper()
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
