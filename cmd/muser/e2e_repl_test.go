package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/serve/dashboard"
)

// The end-to-end tests run the muser binary as separate processes, one
// --home each, talking over loopback: replication between two nodes, and
// disaggregated prefill between a producer and a consumer compared with a
// single node that prefills locally.

// hangGuard bounds every wait on a child process. It is not a performance
// assertion: it turns a hang into a failure with the process's logs.
const hangGuard = 2 * time.Minute

// e2e holds the built binary.
type e2e struct {
	t   *testing.T
	bin string
}

func newE2E(t *testing.T) *e2e {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping: builds and runs the muser binary (-short)")
	}
	if _, err := os.Stat(storiesModel); err != nil {
		t.Skipf("skipping: %s is absent: %v", storiesModel, err)
	}
	if bin := os.Getenv("MUSER_E2E_BIN"); bin != "" {
		// A machine with no Go toolchain (the GPU machine) runs the
		// tests against a muser binary built elsewhere.
		return &e2e{t: t, bin: bin}
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		// go test runs with the toolchain's bin directory in GOROOT.
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		if _, serr := os.Stat(gobin); serr != nil {
			t.Skipf("skipping: no go command to build muser: %v", err)
		}
	}
	bin := filepath.Join(t.TempDir(), "muser")
	out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return &e2e{t: t, bin: bin}
}

// muser runs one command to its end.
func (e *e2e) muser(args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	var o, x bytes.Buffer
	cmd := exec.Command(e.bin, args...)
	cmd.Stdout, cmd.Stderr = &o, &x
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), o.String(), x.String()
	}
	if err != nil {
		e.t.Fatalf("muser %s: %v", strings.Join(args, " "), err)
	}
	return 0, o.String(), x.String()
}

// must runs a command that must succeed and returns its stdout.
func (e *e2e) must(args ...string) string {
	e.t.Helper()
	code, out, errOut := e.muser(args...)
	if code != 0 {
		e.t.Fatalf("muser %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// syncBuffer collects a child's output while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// server is a running `muser serve`.
type server struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

// serve starts `muser serve` on home and waits for its ready line.
func (e *e2e) serve(name, home string, args ...string) *server {
	e.t.Helper()
	args = append([]string{"serve", "--model", storiesModel, "--home", home, "--addr", "127.0.0.1:0",
		"--ctx", "512", "--threads", "1", "--shutdown-grace", "20s"}, args...)
	cmd := exec.Command(e.bin, args...)
	s := &server{t: e.t, name: name, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = s.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), " ready on "); ok {
				u, _, _ := strings.Cut(rest, " ")
				urls <- u
			}
		}
		s.err = cmd.Wait()
		close(s.done)
	}()
	select {
	case s.url = <-urls:
	case <-s.done:
		e.t.Fatalf("%s exited before it was ready: %v\nstderr: %s", name, s.err, s.stderr.String())
	case <-time.After(hangGuard):
		cmd.Process.Kill()
		e.t.Fatalf("%s not ready after %v (hang guard)\nstderr: %s", name, hangGuard, s.stderr.String())
	}
	e.t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// stop sends SIGTERM and checks the server exits 0.
func (s *server) stop() {
	s.t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(hangGuard):
		s.cmd.Process.Kill()
		<-s.done
		s.t.Fatalf("%s did not stop after SIGTERM within %v (hang guard)\nstderr: %s", s.name, hangGuard, s.stderr.String())
	}
	if s.err != nil {
		s.t.Fatalf("%s exited with %v after SIGTERM, want 0\nstderr: %s", s.name, s.err, s.stderr.String())
	}
}

// waitLog waits until the server's stderr holds want.
func (s *server) waitLog(want string) {
	s.t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !strings.Contains(s.stderr.String(), want) {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s never logged %q within %v (hang guard)\nstderr: %s", s.name, want, hangGuard, s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// post sends a JSON request and decodes the JSON answer.
func (s *server) post(path, body string) (int, map[string]any) {
	s.t.Helper()
	resp, err := http.Post(s.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		s.t.Fatalf("%s %s: %v\nstderr: %s", s.name, path, err, s.stderr.String())
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		s.t.Fatalf("%s %s: answer %q is not JSON: %v", s.name, path, data, err)
	}
	return resp.StatusCode, m
}

// generate posts a generation request that must succeed and returns the
// answer's choices (text, token log-probabilities, finish reason; no IDs
// or timestamps) as JSON, and the prompt tokens served from the cache.
func (s *server) generate(path, body string) (choices string, cached int) {
	s.t.Helper()
	code, m := s.post(path, body)
	if code != 200 {
		s.t.Fatalf("%s %s: status %d, want 200: %v\nstderr: %s", s.name, path, code, m, s.stderr.String())
	}
	c, err := json.Marshal(m["choices"])
	if err != nil {
		s.t.Fatal(err)
	}
	usage, _ := m["usage"].(map[string]any)
	details, _ := usage["prompt_tokens_details"].(map[string]any)
	n, _ := details["cached_tokens"].(float64)
	return string(c), int(n)
}

// dashboard returns s's dashboard state.
func (s *server) dashboard() dashboard.State {
	s.t.Helper()
	resp, err := http.Get(s.url + dashboard.StatePath)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st dashboard.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != 200 {
		s.t.Fatalf("%s: dashboard state: %d, %v", s.name, resp.StatusCode, err)
	}
	return st
}

// metric returns the value of the sample of name on s's /metrics whose
// labels include label (for example `peer="beta"`); the test fails if
// there is none.
func (s *server) metric(name, label string) float64 {
	s.t.Helper()
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			s.t.Fatalf("%s: metric line %q: %v", s.name, line, err)
		}
		return v
	}
	s.t.Fatalf("%s: /metrics has no %s with %s:\n%s", s.name, name, label, body)
	return 0
}

// freeUDP returns a free UDP port on loopback.
func freeUDP(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().String()
}

// cluster2 makes a two-node cluster a, b under two homes, each knowing
// the other's replication address.
func (e *e2e) cluster2(a, b string) (homeA, homeB, addrA, addrB string) {
	t := e.t
	dir := t.TempDir()
	homeA, homeB = filepath.Join(dir, a), filepath.Join(dir, b)
	addrA, addrB = freeUDP(t), freeUDP(t)
	e.must("cluster", "init", "--home", homeA, "--name", a)
	bundle := filepath.Join(dir, b+".bundle")
	e.must("node", "enroll", "--home", homeA, "-o", bundle, b)
	e.must("node", "join", "--home", homeB, bundle)
	e.must("node", "add", "--home", homeA, b, addrB)
	e.must("node", "add", "--home", homeB, a, addrA)
	return
}

type packRecord struct {
	ID     string `json:"id"`
	Tokens int    `json:"tokens"`
}

func (e *e2e) packs(home string) []packRecord {
	e.t.Helper()
	var ps []packRecord
	out := e.must("pack", "ls", "--json", "--home", home)
	if err := json.Unmarshal([]byte(out), &ps); err != nil {
		e.t.Fatalf("pack ls --json: %v\n%s", err, out)
	}
	return ps
}

func hasPack(ps []packRecord, id string) bool {
	for _, p := range ps {
		if p.ID == id {
			return true
		}
	}
	return false
}

// TestE2EReplication: two processes with separate homes on loopback.
// (a) pack push and pack pull against a serving peer; (b) continuous
// replication with --replicate-to: the packs arrive, verify, and serve
// prefix hits on the receiver with the same output.
func TestE2EReplication(t *testing.T) {
	e := newE2E(t)
	homeA, homeB, _, addrB := e.cluster2("alpha", "beta")
	// Nothing is shared between the homes but the cluster: both servers
	// derive their tenant salts from its link secret, so beta serves
	// alpha's packs (docs/replication.md, "Serving replicated packs").

	// (a) One pack made on each side by muser run; push alpha's to beta
	// and pull beta's from alpha while beta serves.
	e.must("run", "--model", storiesModel, "--home", homeA, "-p", infertest.Story(1, 90), "-n", "4", "--temperature", "0")
	e.must("run", "--model", storiesModel, "--home", homeB, "-p", infertest.Story(2, 90), "-n", "4", "--temperature", "0")
	pa, pb := e.packs(homeA), e.packs(homeB)
	if len(pa) != 1 || len(pb) != 1 {
		t.Fatalf("after muser run: %d packs on alpha, %d on beta; want 1 each", len(pa), len(pb))
	}
	beta := e.serve("beta", homeB, "--repl-addr", addrB)
	out := e.must("pack", "push", "--home", homeA, "--json", "beta", pa[0].ID)
	var res struct {
		Pack  string `json:"pack"`
		Moved int    `json:"moved"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Pack != pa[0].ID || res.Moved == 0 {
		t.Fatalf("pack push: %q (%v); want pack %s with chunks moved", out, err, pa[0].ID)
	}
	out = e.must("pack", "pull", "--home", homeA, "--json", "beta", pb[0].ID)
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Pack != pb[0].ID || res.Moved == 0 {
		t.Fatalf("pack pull: %q (%v); want pack %s with chunks moved", out, err, pb[0].ID)
	}
	beta.stop()
	if ps := e.packs(homeB); !hasPack(ps, pa[0].ID) {
		t.Fatalf("beta's packs %v lack the pushed %s", ps, pa[0].ID)
	}
	if ps := e.packs(homeA); !hasPack(ps, pb[0].ID) {
		t.Fatalf("alpha's packs %v lack the pulled %s", ps, pb[0].ID)
	}

	// A push queued while beta is down is retried, and abandoned with a
	// log line when alpha shuts down (a short grace: the hang guard is
	// not a timing assertion).
	alpha := e.serve("alpha", homeA, "--replicate-to", "beta", "--shutdown-grace", "1s")
	alpha.generate("/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":2,"temperature":0}`, infertest.Story(4, 90)))
	alpha.waitLog("replication failed; retrying")
	alpha.stop()
	if log := alpha.stderr.String(); !strings.Contains(log, "replication queue abandoned") || !strings.Contains(log, "packs=1") {
		t.Fatalf("alpha's log does not say it abandoned the queued push:\n%s", log)
	}

	// (b) Continuous replication: alpha serves with --replicate-to beta.
	beta = e.serve("beta", homeB, "--repl-addr", addrB)
	alpha = e.serve("alpha", homeA, "--replicate-to", "beta")
	req := fmt.Sprintf(`{"prompt":%q,"max_tokens":8,"temperature":0,"logprobs":2}`, infertest.Story(3, 150))
	wantChoices, cached := alpha.generate("/v1/completions", req)
	if cached != 0 {
		t.Fatalf("alpha's first request: %d cached tokens, want 0", cached)
	}
	alpha.waitLog("replicated pack")
	if v := alpha.metric("muser_replication_pushed_total", `peer="beta"`); v != 1 {
		t.Errorf("alpha's muser_replication_pushed_total{peer=\"beta\"} = %v, want 1", v)
	}
	if v := alpha.metric("muser_replication_queue_packs", `peer="beta"`); v != 0 {
		t.Errorf("alpha's muser_replication_queue_packs{peer=\"beta\"} = %v, want 0", v)
	}
	// The dashboard's Nodes tab shows the cluster, the peer and its last
	// push.
	if cs := alpha.dashboard().Nodes.Cluster; cs == nil || cs.Node != "alpha" || len(cs.Peers) != 1 || cs.Peers[0].Name != "beta" ||
		!cs.Peers[0].ReplicateTo || cs.Peers[0].LastPush == nil || !cs.Peers[0].LastPush.OK || cs.Peers[0].LastPush.Moved == 0 ||
		cs.Peers[0].Pushed.Value == nil || *cs.Peers[0].Pushed.Value != 1 {
		t.Errorf("alpha's dashboard nodes: got %+v, want node alpha with peer beta, one push, the last one ok with chunks moved", cs)
	}
	alpha.stop()
	beta.stop()
	if !strings.Contains(alpha.stderr.String(), "pushed=1") {
		t.Errorf("alpha's shutdown log does not count the push: %s", alpha.stderr.String())
	}
	before := len(e.packs(homeB))
	if before != 3 {
		t.Fatalf("beta holds %d packs, want 3 (its own, the pushed, the replicated)", before)
	}
	e.must("pack", "verify", "--home", homeB) // exit 0: every pack, chunk and Merkle root verifies
	beta = e.serve("beta", homeB)
	got, cached := beta.generate("/v1/completions", req)
	if cached == 0 {
		t.Errorf("beta served the replicated prompt with 0 cached tokens, want a prefix hit")
	}
	if got != wantChoices {
		t.Errorf("beta's answer differs from alpha's:\n got %s\nwant %s", got, wantChoices)
	}
	beta.stop()
}

// TestE2ERemotePrefill: a producer P, a consumer C (--prefill-node P) and
// a single local node L answer the same requests byte for byte (with
// MUSER_E2E_PRODUCER_DEVICE=cuda, P prefills on a GPU and C and L compute
// on the CPU); C's
// prompts come from the store; with P stopped C falls back locally (same
// output, a log line saying why), and with --prefill-fallback fail the
// request fails with 502.
func TestE2ERemotePrefill(t *testing.T) {
	e := newE2E(t)
	homeP, homeC, addrP, _ := e.cluster2("producer", "consumer")
	homeL := filepath.Join(t.TempDir(), "local")

	pargs := []string{"--role", "producer", "--repl-addr", addrP}
	if d := os.Getenv("MUSER_E2E_PRODUCER_DEVICE"); d != "" {
		// The disaggregated lane: a GPU producer (--device cuda) for a
		// consumer and a local reference on the CPU.
		pargs = append(pargs, "--device", d)
	}
	p := e.serve("producer", homeP, pargs...)
	c := e.serve("consumer", homeC, "--prefill-node", "producer")
	// L computes every prompt (no slot reuse): the local-prefill reference.
	l := e.serve("local", homeL, "--slot-reuse=false")

	chat := func(seed, words int, extra string) string {
		return fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":12,"logprobs":true,"top_logprobs":2%s}`,
			infertest.Story(seed, words), extra)
	}
	completion := func(seed, words int, extra string) string {
		return fmt.Sprintf(`{"prompt":%q,"max_tokens":12,"logprobs":2%s}`, infertest.Story(seed, words), extra)
	}
	cases := []struct {
		name, path, body string
	}{
		{"chat greedy", "/v1/chat/completions", chat(10, 150, `,"temperature":0`)},
		{"completion greedy", "/v1/completions", completion(11, 150, `,"temperature":0`)},
		{"completion seeded", "/v1/completions", completion(12, 200, `,"temperature":0.9,"seed":42`)},
		{"chat seeded", "/v1/chat/completions", chat(13, 120, `,"temperature":0.8,"seed":7`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, lc := l.generate(tc.path, tc.body)
			got, cc := c.generate(tc.path, tc.body)
			if got != want {
				t.Errorf("consumer's answer differs from a local prefill's:\n got %s\nwant %s", got, want)
			}
			if lc != 0 || cc < 64 {
				t.Errorf("cached tokens: local %d, consumer %d; want 0 and at least one 64-token block from the producer", lc, cc)
			}
		})
	}
	if strings.Contains(c.stderr.String(), "prefilling locally") {
		t.Fatalf("the consumer fell back while the producer ran:\n%s", c.stderr.String())
	}
	if v := c.metric("muser_remote_prefill_total", `outcome="remote"`); v != float64(len(cases)) {
		t.Errorf("consumer's muser_remote_prefill_total{outcome=\"remote\"} = %v, want %d", v, len(cases))
	}
	if v := c.metric("muser_remote_prefill_total", `outcome="fallback"`); v != 0 {
		t.Errorf("consumer's muser_remote_prefill_total{outcome=\"fallback\"} = %v, want 0", v)
	}
	// The request's timings name the producer; the dashboard shows its
	// health.
	if code, m := c.post("/v1/chat/completions", chat(16, 150, `,"temperature":0,"timings":true`)); code != 200 {
		t.Errorf("chat with timings: status %d %v", code, m)
	} else if tm, _ := m["timings"].(map[string]any); tm["prefill_at"] != "peer:producer" || tm["remote_prefill_ms"] == nil {
		t.Errorf("consumer's timings: got %v, want prefill_at peer:producer and a remote_prefill_ms", tm)
	}
	if cs := c.dashboard().Nodes.Cluster; cs == nil || cs.Producer == nil || cs.Producer.Name != "producer" ||
		cs.Producer.Outcomes["remote"] != len(cases)+1 || cs.Producer.Last != "remote" {
		t.Errorf("consumer's dashboard nodes: got %+v, want producer with %d remote outcomes, the last one remote", cs, len(cases)+1)
	}

	// The producer stops: the consumer falls back, with the same output.
	p.stop()
	body := completion(14, 150, `,"temperature":0`)
	want, _ := l.generate("/v1/completions", body)
	got, cc := c.generate("/v1/completions", body)
	if got != want {
		t.Errorf("after falling back, the consumer's answer differs from a local prefill's:\n got %s\nwant %s", got, want)
	}
	if cc != 0 {
		t.Errorf("after falling back: %d cached tokens, want 0 (computed locally)", cc)
	}
	c.waitLog("remote prefill failed; prefilling locally")
	if v := c.metric("muser_remote_prefill_total", `outcome="fallback"`); v != 1 {
		t.Errorf("consumer's muser_remote_prefill_total{outcome=\"fallback\"} = %v after the producer stopped, want 1", v)
	}
	c.stop()
	l.stop()

	// --prefill-fallback fail: the request fails, and says why.
	c = e.serve("consumer", homeC, "--prefill-node", "producer", "--prefill-fallback", "fail")
	code, m := c.post("/v1/completions", completion(15, 150, `,"temperature":0`))
	msg, _ := json.Marshal(m)
	if code != http.StatusBadGateway || !strings.Contains(string(msg), "remote_prefill_failed") || !strings.Contains(string(msg), "producer") {
		t.Errorf("with the producer down and --prefill-fallback fail: status %d %s; want 502 remote_prefill_failed naming the producer", code, msg)
	}
	c.waitLog("failing the request")
	if v := c.metric("muser_remote_prefill_total", `outcome="failed"`); v != 1 {
		t.Errorf("consumer's muser_remote_prefill_total{outcome=\"failed\"} = %v, want 1", v)
	}
	c.stop()
}
