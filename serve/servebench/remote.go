package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The -remote mode measures disaggregated prefill with real `muser serve`
// processes on loopback (so this command imports nothing of net/: it
// drives the CLI):
//
//   - producer P: muser serve --role producer --repl-addr, its own home;
//   - consumers C1..Cn: muser serve --prefill-node P, a fresh home each
//     (so every remote measurement starts with an empty consumer store);
//   - every home belongs to one cluster, whose link secret every server
//     derives its tenant salts from, so the local tenant's salt is the
//     same everywhere (P's cache serves the consumers' prompts).
//
// For each depth: a cold request on P (a local prefill: the "local cold"
// peer, which also leaves the prefix in P's store); then on each consumer
// the same prompt once (remote: P restores the prefix from its cache and
// ships every block; the consumer verifies, publishes, restores and
// decodes one token) and three times more (a local warm hit: the prefix
// restored from the consumer's own store).

// child is a running muser serve process.
type child struct {
	name   string
	cmd    *exec.Cmd
	url    string
	stderr *bytes.Buffer
	done   chan error
}

// serveKVCommit starts every muser serve with --kv-commit (-kv-commit).
var serveKVCommit bool

func startServe(bin, name, home, model string, ctx, threads int, extra ...string) (*child, error) {
	args := append([]string{"serve", "--home", home, "--model", model, "--addr", "127.0.0.1:0",
		"--ctx", strconv.Itoa(ctx), "--threads", strconv.Itoa(threads), "--parallel", "1",
		"--slot-reuse=false", "--log-level", "warn"}, extra...)
	if serveKVCommit {
		args = append(args, "--kv-commit")
	}
	c := &child{name: name, cmd: exec.Command(bin, args...), stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	c.cmd.Stderr = c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), " ready on "); ok {
				u, _, _ := strings.Cut(rest, " ")
				urls <- u
			}
		}
		c.done <- c.cmd.Wait()
	}()
	select {
	case c.url = <-urls:
		return c, nil
	case err := <-c.done:
		return nil, fmt.Errorf("%s exited before it was ready: %v: %s", name, err, c.stderr.String())
	}
}

func (c *child) stop() error {
	c.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-c.done; err != nil {
		return fmt.Errorf("%s: %v: %s", c.name, err, c.stderr.String())
	}
	return nil
}

// cpu returns the process's user and system CPU time (/proc/PID/stat).
func (c *child) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * time.Second / 100 // USER_HZ is 100 on Linux
}

// waitPublished waits until the server has no publish pending.
func (c *child) waitPublished() error {
	for range 6000 {
		resp, err := http.Get(c.url + "/metrics")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, "muser_publish_pending "); ok && strings.TrimSpace(v) == "0" {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: publishes still pending after 5 minutes", c.name)
}

func muserCmd(bin string, args ...string) error {
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("muser %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func freeUDPAddr() (string, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer pc.Close()
	return pc.LocalAddr().String(), nil
}

type remoteRow struct {
	depth                          int
	cold, coldCPU                  time.Duration
	remote, remoteCPU, producerCPU []time.Duration
	warm, warmCPU                  []time.Duration
	remoteCached, warmCached       int
}

func runRemote(bin, modelPath string, depths []int, consumers, threads int, warmConn bool, producerDevice string) error {
	tmp, err := os.MkdirTemp("", "servebench-remote-")
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
	home := func(name string) (string, error) {
		h := filepath.Join(tmp, name)
		return h, os.MkdirAll(h, 0o700)
	}
	homeP, err := home("producer")
	if err != nil {
		return err
	}
	addrP, err := freeUDPAddr()
	if err != nil {
		return err
	}
	if err := muserCmd(bin, "cluster", "init", "--home", homeP, "--name", "producer"); err != nil {
		return err
	}
	var homesC []string
	for i := range consumers {
		name := fmt.Sprintf("consumer%d", i+1)
		h, err := home(name)
		if err != nil {
			return err
		}
		bundle := filepath.Join(tmp, name+".bundle")
		for _, args := range [][]string{
			{"node", "enroll", "--home", homeP, "-o", bundle, name},
			{"node", "join", "--home", h, bundle},
			{"node", "add", "--home", homeP, name},
			{"node", "add", "--home", h, "producer", addrP},
		} {
			if err := muserCmd(bin, args...); err != nil {
				return err
			}
		}
		homesC = append(homesC, h)
	}
	maxDepth := 512
	for _, d := range depths {
		maxDepth = max(maxDepth, d)
	}
	ctx := maxDepth + 64
	rng := rand.New(rand.NewPCG(7, 7))
	pargs := []string{"--role", "producer", "--repl-addr", addrP}
	if producerDevice != "" {
		pargs = append(pargs, "--device", producerDevice)
	}
	p, err := startServe(bin, "producer", homeP, modelPath, ctx, threads, pargs...)
	if err != nil {
		return err
	}
	defer p.stop()
	// cold is where local cold is measured: the producer, or, when the
	// producer computes on another device, a CPU server of its own.
	cold := p
	if producerDevice != "" {
		homeL, err := home("local")
		if err != nil {
			return err
		}
		if cold, err = startServe(bin, "local", homeL, modelPath, ctx, threads); err != nil {
			return err
		}
		defer cold.stop()
	}
	fresh := func(d int) []int32 {
		prompt := make([]int32, d)
		for i := range prompt {
			prompt[i] = int32(3 + rng.IntN(150000))
		}
		return prompt
	}

	fmt.Printf("Model: %s (%s), %d engine threads per server, %d CPUs, muser binary %s; load average at start: %s\n\n",
		filepath.Base(modelPath), size(modelPath), threads, runtimeCPUs(), bin, loadavg())
	var rows []remoteRow
	for _, d := range depths {
		prompt := fresh(d)
		r := remoteRow{depth: d}
		logf("depth %d: cold on %s", d, cold.name)
		cpu0 := cold.cpu()
		coldT, c0, err := (&bench{url: cold.url}).firstToken(prompt)
		if err != nil {
			return err
		}
		r.cold, r.coldCPU = coldT, cold.cpu()-cpu0
		if c0 != 0 {
			return fmt.Errorf("depth %d: the cold request had %d cached tokens", d, c0)
		}
		if err := cold.waitPublished(); err != nil {
			return err
		}
		logf("depth %d: cold %v (cpu %v)", d, coldT, r.coldCPU)
		for i, h := range homesC {
			c, err := startServe(bin, fmt.Sprintf("consumer%d", i+1), h, modelPath, ctx, threads, "--prefill-node", "producer",
				"--prefill-fallback", "fail")
			if err != nil {
				return err
			}
			cb := &bench{url: c.url}
			if warmConn {
				// A one-block prompt of other tokens: the consumer dials
				// the producer (QUIC + mTLS handshake) and the producer
				// computes 64 tokens; the measured request then runs on
				// the open connection, as a running server's would.
				w := make([]int32, 65)
				for j := range w {
					w[j] = int32(3 + rng.IntN(150000))
				}
				if _, _, err := cb.firstToken(w); err != nil {
					c.stop()
					return fmt.Errorf("connection warm-up on consumer%d: %w", i+1, err)
				}
				if err := c.waitPublished(); err != nil {
					return err
				}
			}
			if producerDevice != "" {
				prompt = fresh(d) // the producer has not seen it: it prefills cold
			}
			pc0, cc0 := p.cpu(), c.cpu()
			t, cached, err := cb.firstToken(prompt)
			if err != nil {
				c.stop()
				return fmt.Errorf("remote request on consumer%d: %w", i+1, err)
			}
			r.remote, r.remoteCPU, r.producerCPU = append(r.remote, t), append(r.remoteCPU, c.cpu()-cc0), append(r.producerCPU, p.cpu()-pc0)
			r.remoteCached = cached
			logf("depth %d: consumer%d remote %v (consumer cpu %v, producer cpu %v), %d cached; %s", d, i+1, t, c.cpu()-cc0, p.cpu()-pc0, cached, cb.timings)
			if err := c.waitPublished(); err != nil {
				return err
			}
			for range 3 {
				cc0 := c.cpu()
				t, cached, err := cb.firstToken(prompt)
				if err != nil {
					c.stop()
					return err
				}
				r.warm, r.warmCPU, r.warmCached = append(r.warm, t), append(r.warmCPU, c.cpu()-cc0), cached
			}
			if err := c.stop(); err != nil {
				return err
			}
		}
		rows = append(rows, r)
	}
	printRemote(rows, consumers, warmConn, producerDevice)
	fmt.Printf("Load average at the end: %s\n", loadavg())
	return nil
}

func runtimeCPUs() int {
	n := 0
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "processor") {
			n++
		}
	}
	return n
}

func printRemote(rows []remoteRow, consumers int, warmConn bool, producerDevice string) {
	fmt.Println("### Time to first token: remote producer vs local prefill (streamed /v1/completions, prompt as token ids)")
	fmt.Println()
	conn := "the first request of each consumer: it includes the QUIC + mTLS handshake"
	if warmConn {
		conn = "each consumer's connection to the producer already open (a one-block request before)"
	}
	remoteCol, coldWhere := "remote producer (holds the prefix)", "one request on the producer"
	if producerDevice != "" {
		remoteCol, coldWhere = "remote producer (--device "+producerDevice+", prefills it cold)", "one request on a CPU server of its own"
	}
	fmt.Printf("Remote: median over %d fresh consumers, %s; local warm hit: median of 3 requests on each consumer (%d in all); local cold: %s.\n\n", consumers, conn, 3*consumers, coldWhere)
	fmt.Printf("| prompt tokens | local cold | %s | local warm hit | cached tokens (remote / warm) | **cold / remote** | remote / warm |\n", remoteCol)
	fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		rm, wm := median(r.remote), median(r.warm)
		fmt.Printf("| %d | %s | %s | %s | %d / %d | **%.1f×** | %.1f× |\n", r.depth, dur(r.cold), dur(rm), dur(wm),
			r.remoteCached, r.warmCached, r.cold.Seconds()/rm.Seconds(), rm.Seconds()/wm.Seconds())
	}
	fmt.Println()
	fmt.Println("| prompt tokens | local cold CPU | remote: consumer CPU | remote: producer CPU | local warm hit CPU |")
	fmt.Println("| ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		fmt.Printf("| %d | %s | %s | %s | %s |\n", r.depth, dur(r.coldCPU), dur(median(r.remoteCPU)), dur(median(r.producerCPU)), dur(median(r.warmCPU)))
	}
	fmt.Println()
}
