package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/net/repl"
	"github.com/muserhq/muser/net/transport"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

// Two-process replication tests: the muser binary, built here, pushes and
// pulls; the peer it talks to is this test binary re-executed as a
// replication node (TestReplNodeChild) with its own data directory, until
// 'muser serve --repl-addr' exists.

const (
	childEnv     = "MUSER_TEST_REPLNODE" // the child's --home
	childBlock   = 16
	childChunk   = 128 << 10
	childSaltStr = "tenant"
)

var childID = packtest.Identity("two-process")

// childEvent is one JSON line a child prints on stdout.
type childEvent struct {
	Event string `json:"event"`
	Addr  string `json:"addr,omitempty"`
	Pack  string `json:"pack,omitempty"`
	N     int64  `json:"n,omitempty"`
	Msg   string `json:"msg,omitempty"`
	Err   string `json:"err,omitempty"`
}

// TestReplNodeChild is the child role; it skips unless re-executed by a
// two-process test. It runs a replication node on the data directory in
// $MUSER_TEST_REPLNODE and prints events as JSON lines until its stdin
// closes. Options (environment): MUSER_TEST_PAUSE_AFTER=K blocks after the
// K-th received chunk until stdin says "resume"; MUSER_TEST_IDLE sets the
// QUIC idle timeout; MUSER_TEST_WINDOW the receive windows; MUSER_TEST_REPLICATE_TO=NODE with
// MUSER_TEST_PUBLISH=N publishes N packs and replicates each as published.
func TestReplNodeChild(t *testing.T) {
	home := os.Getenv(childEnv)
	if home == "" {
		t.Skip("child role of the two-process tests")
	}
	if err := runChild(home); err != nil {
		fmt.Printf("{\"event\":\"fatal\",\"err\":%q}\n", err.Error())
		os.Exit(1)
	}
	os.Exit(0)
}

func runChild(home string) error {
	var outMu sync.Mutex
	emit := func(e childEvent) {
		b, _ := json.Marshal(e)
		outMu.Lock()
		os.Stdout.Write(append(b, '\n'))
		outMu.Unlock()
	}
	h, err := cluster.Open(home)
	if err != nil {
		return err
	}
	s, err := store.Open(home, store.Options{BlockTokens: childBlock, Node: h.Name()})
	if err != nil {
		return err
	}
	defer s.Close()

	resume := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "resume" {
				close(resume)
			}
		}
		close(stop)
	}()
	pauseAfter, _ := strconv.ParseInt(os.Getenv("MUSER_TEST_PAUSE_AFTER"), 10, 64)
	var chunks atomic.Int64
	q := transport.DefaultQUIC()
	if d, err := time.ParseDuration(os.Getenv("MUSER_TEST_IDLE")); err == nil {
		q.MaxIdleTimeout = d
		q.KeepAlivePeriod = d / 4
	}
	if w, err := strconv.ParseUint(os.Getenv("MUSER_TEST_WINDOW"), 10, 64); err == nil {
		// Small receive windows: a paused receiver stops its sender.
		q.InitialStreamReceiveWindow, q.MaxStreamReceiveWindow = w, w
		q.InitialConnectionReceiveWindow, q.MaxConnectionReceiveWindow = 2*w, 2*w
	}
	logger := slog.New(slog.NewJSONHandler(lineWriter{emit}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rn, err := repl.New(repl.Config{Store: s, Cluster: h, QUIC: q, Logger: logger,
		OnChunk: func(string, pack.Digest, int) {
			n := chunks.Add(1)
			emit(childEvent{Event: "chunk", N: n})
			if n == pauseAfter {
				emit(childEvent{Event: "paused", N: n})
				<-resume
			}
		}})
	if err != nil {
		return err
	}
	defer rn.Close()
	if err := rn.Listen("127.0.0.1:0"); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go rn.Serve(ctx)
	emit(childEvent{Event: "listening", Addr: rn.Addr().String()})

	if peer := os.Getenv("MUSER_TEST_REPLICATE_TO"); peer != "" {
		n, _ := strconv.Atoi(os.Getenv("MUSER_TEST_PUBLISH"))
		r := repl.NewReplicator(rn, peer, repl.ReplicatorOptions{MinBackoff: 50 * time.Millisecond,
			OnResult: func(res repl.Result, err error) {
				if err == nil {
					emit(childEvent{Event: "replicated", Pack: res.Pack.String(), N: int64(res.Moved)})
				}
			}})
		go r.Run(ctx)
		// Publish packs as a server would, one after another, each
		// extending the last: the replicator pushes each as it appears.
		tokens := packtest.Tokens(77, n*childBlock*2, 512)
		for i := 1; i <= n; i++ {
			prefix := tokens[:i*childBlock*2]
			res, err := s.PublishPrefix(ctx, childID, []byte(childSaltStr), prefix,
				storetest.KV(childID, []byte(childSaltStr), prefix, childBlock, childChunk))
			if err != nil {
				return err
			}
			emit(childEvent{Event: "published", Pack: res.Pack.String()})
			r.Enqueue(res.Pack)
			time.Sleep(20 * time.Millisecond)
		}
	}
	<-stop
	return nil
}

// lineWriter turns slog's JSON lines into log events.
type lineWriter struct{ emit func(childEvent) }

func (w lineWriter) Write(p []byte) (int, error) {
	var rec map[string]any
	if json.Unmarshal(p, &rec) == nil {
		e := childEvent{Event: "log", Msg: fmt.Sprint(rec["msg"])}
		if v, ok := rec["err"]; ok {
			e.Err = fmt.Sprint(v)
		}
		w.emit(e)
	}
	return len(p), nil
}

// child is a running TestReplNodeChild process.
type child struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan childEvent
	addr   string
	mu     sync.Mutex
	seen   []childEvent
	done   chan struct{}
}

func startChild(t *testing.T, home string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReplNodeChild$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"="+home), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, cmd: cmd, stdin: stdin, events: make(chan childEvent, 4096), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e childEvent
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue // a line from the test framework
			}
			c.mu.Lock()
			c.seen = append(c.seen, e)
			c.mu.Unlock()
			c.events <- e
		}
	}()
	t.Cleanup(func() { c.stop() })
	e := c.wait(func(e childEvent) bool { return e.Event == "listening" })
	c.addr = e.Addr
	return c
}

// wait returns the next event that matches, failing on a fatal one.
func (c *child) wait(match func(childEvent) bool) childEvent {
	c.t.Helper()
	for {
		select {
		case e := <-c.events:
			if e.Event == "fatal" {
				c.t.Fatalf("child failed: %s", e.Err)
			}
			if match(e) {
				return e
			}
		case <-c.done:
			c.t.Fatal("child exited")
		}
	}
}

func (c *child) count(event string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.seen {
		if e.Event == event {
			n++
		}
	}
	return n
}

func (c *child) send(line string) {
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// stop closes the child's stdin and waits for it to exit.
func (c *child) stop() {
	if c.cmd.ProcessState != nil {
		return
	}
	c.stdin.Close()
	<-c.done
	if err := c.cmd.Wait(); err != nil {
		c.t.Errorf("child: %v", err)
	}
}

// muserBin builds the muser binary once per test.
func muserBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "muser")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// muser runs the built binary and returns its exit status and output.
func runBin(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

func mustRunBin(t *testing.T, bin string, args ...string) string {
	t.Helper()
	code, out, errOut := runBin(t, bin, args...)
	if code != 0 {
		t.Fatalf("muser %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// twoNodes makes data directories for alpha (CA holder), beta and gamma
// with the real CLI, each admitting the others.
func twoNodes(t *testing.T, bin string) (a, b, c string) {
	t.Helper()
	root := t.TempDir()
	a, b, c = filepath.Join(root, "alpha"), filepath.Join(root, "beta"), filepath.Join(root, "gamma")
	mustRunBin(t, bin, "cluster", "init", "--home", a, "--name", "alpha")
	for _, n := range []struct{ name, home string }{{"beta", b}, {"gamma", c}} {
		bundle := filepath.Join(root, n.name+".bundle")
		mustRunBin(t, bin, "node", "enroll", "--home", a, n.name, "-o", bundle)
		mustRunBin(t, bin, "node", "join", "--home", n.home, bundle)
	}
	mustRunBin(t, bin, "node", "add", "--home", b, "gamma")
	mustRunBin(t, bin, "node", "add", "--home", c, "beta")
	return a, b, c
}

// publishPacks publishes n synthetic packs of blocks blocks in the store
// under home (creating it) and returns their IDs and tokens.
func publishPacks(t *testing.T, home string, n, blocks int, seed uint64) ([]pack.Digest, [][]int32) {
	t.Helper()
	s, err := store.Open(home, store.Options{BlockTokens: childBlock, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ids []pack.Digest
	var toks [][]int32
	for i := range n {
		tokens := packtest.Tokens(seed+uint64(i), blocks*childBlock, 512)
		res := storetest.Publish(t, s, childID, []byte(childSaltStr), tokens, childChunk)
		ids = append(ids, res.Pack)
		toks = append(toks, tokens)
	}
	return ids, toks
}

func decodeTransfers(t *testing.T, out string) []transferJSON {
	t.Helper()
	var res []transferJSON
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r transferJSON
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		res = append(res, r)
	}
	return res
}

// checkStore opens the store under home: every pack verifies, and each
// token list is a prefix hit.
func checkStore(t *testing.T, home string, wantPacks int, tokens [][]int32) {
	t.Helper()
	s, err := store.Open(home, store.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.Check(t, s)
	ps, err := s.Packs()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != wantPacks {
		t.Fatalf("%s holds %d packs, want %d", home, len(ps), wantPacks)
	}
	for _, tok := range tokens {
		n, err := s.Restore(context.Background(), childID, []byte(childSaltStr), tok, func(int, []byte) error { return nil })
		if err != nil || n != len(tok) {
			t.Fatalf("prefix hit in %s: %d of %d tokens, %v", home, n, len(tok), err)
		}
	}
}

func TestTwoProcessPushPullReplicate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs several processes")
	}
	bin := muserBin(t)
	a, b, c := twoNodes(t, bin)
	ids, toks := publishPacks(t, a, 2, 12, 1)

	beta := startChild(t, b)
	mustRunBin(t, bin, "node", "add", "--home", a, "beta", beta.addr)
	mustRunBin(t, bin, "node", "add", "--home", c, "beta", beta.addr)

	// push (a separate muser process) to beta (the child process).
	out := mustRunBin(t, bin, "pack", "push", "--home", a, "--json", "beta", ids[0].String()[:12], ids[1].String())
	for i, r := range decodeTransfers(t, out) {
		if r.Error != "" || r.Pack != ids[i] || r.Moved != 12 || r.Chunks != 12 {
			t.Fatalf("push %d: %+v, want pack %s with 12 of 12 chunks moved", i, r, ids[i].Short())
		}
	}
	// push again: nothing moves.
	out = mustRunBin(t, bin, "pack", "push", "--home", a, "beta", "--all")
	if !strings.Contains(out, "0 of 12 chunks moved") {
		t.Fatalf("second push: %q, want nothing moved", out)
	}
	// gamma pulls one pack from beta by an ID prefix, into its store
	// (configured, as every store of a cluster, with the cluster's block
	// size).
	publishPacks(t, c, 0, 0, 0)
	out = mustRunBin(t, bin, "pack", "pull", "--home", c, "beta", ids[1].String()[:16])
	if !strings.Contains(out, "pulled "+ids[1].Short()+" from beta: 12 of 12 chunks moved") {
		t.Fatalf("pull: %q", out)
	}
	code, _, errOut := runBin(t, bin, "pack", "pull", "--home", c, "beta", strings.Repeat("e", 64))
	if code != exitNotFound {
		t.Fatalf("pull of an unknown pack: exit %d (%s), want %d", code, errOut, exitNotFound)
	}

	// Continuous replication: alpha runs as a node that publishes three
	// packs and replicates each to beta as it appears.
	alpha := startChild(t, a, "MUSER_TEST_REPLICATE_TO=beta", "MUSER_TEST_PUBLISH=3")
	for range 3 {
		alpha.wait(func(e childEvent) bool { return e.Event == "replicated" })
	}
	alpha.stop()
	beta.stop()

	contTokens := packtest.Tokens(77, 3*childBlock*2, 512)
	checkStore(t, b, 5, append(toks, contTokens[:childBlock*2], contTokens[:childBlock*4], contTokens))
	checkStore(t, c, 1, toks[1:])
	// The store's own CLI agrees.
	mustRunBin(t, bin, "pack", "verify", "--home", b)
}

// TestTwoProcessKilledSender: a muser pack push killed mid-transfer leaves
// no visible pack on the receiver; the retry moves only the chunks the
// receiver did not store.
func TestTwoProcessKilledSender(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs several processes")
	}
	bin := muserBin(t)
	a, b, _ := twoNodes(t, bin)
	const blocks = 40
	ids, toks := publishPacks(t, a, 1, blocks, 9)

	// Windows of 4 chunks: while the receiver is paused the sender blocks
	// with most of the pack unsent, and is killed there.
	beta := startChild(t, b, "MUSER_TEST_PAUSE_AFTER=10", "MUSER_TEST_IDLE=1s",
		"MUSER_TEST_WINDOW="+strconv.Itoa(4*childChunk))
	mustRunBin(t, bin, "node", "add", "--home", a, "beta", beta.addr)
	push := exec.Command(bin, "pack", "push", "--home", a, "--streams", "2", "beta", ids[0].String())
	if err := push.Start(); err != nil {
		t.Fatal(err)
	}
	beta.wait(func(e childEvent) bool { return e.Event == "paused" })
	if err := push.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = push.Wait()
	beta.send("resume")
	e := beta.wait(func(e childEvent) bool { return e.Event == "log" && strings.Contains(e.Msg, "receive push") })
	if !strings.Contains(e.Err, "truncated") {
		t.Fatalf("receiver's outcome %+v, want a truncated transfer", e)
	}
	beta.stop()
	stored := beta.count("chunk")
	t.Logf("the receiver stored %d of %d chunks before the sender died", stored, blocks)
	if stored < 10 || stored > 10+2*4+2 {
		t.Fatalf("stored %d chunks, want 10 and at most the ~2 windows in flight", stored)
	}
	checkStore(t, b, 0, nil) // no partial pack is visible

	beta = startChild(t, b)
	mustRunBin(t, bin, "node", "add", "--home", a, "beta", beta.addr)
	out := mustRunBin(t, bin, "pack", "push", "--home", a, "--json", "beta", ids[0].String())
	r := decodeTransfers(t, out)[0]
	if r.Moved != blocks-stored {
		t.Fatalf("retry moved %d chunks, want %d (%d were kept)", r.Moved, blocks-stored, stored)
	}
	beta.stop()
	checkStore(t, b, 1, toks)
}

// TestTwoProcessRemovedNode: 'muser node rm' on a running node takes
// effect for the next connection: the push is refused (exit 4).
func TestTwoProcessRemovedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs several processes")
	}
	bin := muserBin(t)
	a, b, _ := twoNodes(t, bin)
	ids, _ := publishPacks(t, a, 1, 2, 20)
	beta := startChild(t, b)
	mustRunBin(t, bin, "node", "add", "--home", a, "beta", beta.addr)
	mustRunBin(t, bin, "node", "rm", "--home", b, "alpha")
	code, _, errOut := runBin(t, bin, "pack", "push", "--home", a, "beta", ids[0].String())
	if code != exitRefused || !strings.Contains(errOut, "refused the handshake") {
		t.Fatalf("push from a removed node: exit %d, %q; want exit %d naming the refused handshake", code, errOut, exitRefused)
	}
	beta.stop()
	checkStore(t, b, 0, nil)
	code, out, _ := runBin(t, bin, "receipts", "ls", "--home", b)
	if code != 0 || !strings.Contains(out, "peer:alpha") || !strings.Contains(out, "unauthorized") {
		t.Fatalf("receipts on beta: exit %d, %q; want an unauthorized receipt from peer:alpha", code, out)
	}
}
