// Command servebench measures muser serve over HTTP on a random-weight
// Qwen2.5-0.5B-shaped Q8_0 model (built with infer/engine/enginetest into
// a temporary directory, never committed):
//
//   - time to first token, cold (empty store) and warm (the same prompt
//     again, its prefix restored from the store; and again after a
//     restart of the server on the same data directory), at prompt depths
//     512, 2,048 and 8,192 tokens;
//   - aggregate decode tokens/s of 1, 4 and 8 concurrent streams.
//
// It prints a Markdown report (the serve section of docs/benchmarks.md
// holds the last one). Usage:
//
//	go run ./serve/servebench [-model FILE] [-depths 512,2048,8192] [-streams 1,4,8]
//
// With -remote it measures time to first token with a remote prefill
// producer against a local cold prefill and a local warm hit, driving
// `muser serve` processes (remote.go):
//
//	go run ./serve/servebench -remote -keep DIR [-depths 2048] [-consumers 3]
//
// Without -model the model is built (about 530 MB) in a temporary
// directory and removed afterwards; -keep DIR builds it there once and
// reuses it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/serve"
)

func main() {
	var (
		modelPath = flag.String("model", "", "GGUF model (default: build the Qwen2.5-0.5B-shaped Q8_0 model)")
		keep      = flag.String("keep", "", "directory to build the model in once and reuse")
		depthsArg = flag.String("depths", "512,2048,8192", "prompt depths for time to first token")
		streamArg = flag.String("streams", "1,4,8", "concurrent streams for decode throughput")
		genTokens = flag.Int("gen", 96, "tokens each stream generates in the throughput runs")
		rounds    = flag.Int("rounds", 2, "throughput rounds (alternating stream counts); the best of each is kept")
		threads   = flag.Int("threads", runtime.NumCPU(), "engine threads")
		batches   = flag.String("decode-batches", "4,-1", "scheduler DecodeBatch values to compare in the throughput runs (-1: no split)")
		profile   = flag.String("cpuprofile", "", "write a CPU profile of the throughput runs to this file")
		remote    = flag.Bool("remote", false, "measure time to first token with a remote prefill producer instead (muser serve processes; see remote.go)")
		consumers = flag.Int("consumers", 3, "with -remote: fresh consumers, one remote measurement each")
		muserBin  = flag.String("muser", "", "with -remote: the muser binary (default: go build ./cmd/muser)")
		warmConn  = flag.Bool("warm-conn", true, "with -remote: open each consumer's connection to the producer before the measured request")
		prodDev   = flag.String("producer-device", "", "with -remote: the producer's --device (e.g. cuda); each consumer then sends a prompt the producer has not seen (it prefills it cold), and local cold is a CPU server of its own")
		tierMode  = flag.Bool("tier", false, "measure time to first token from the fleet tier (an S3 server, -s3-server) vs a cold prefill instead (muser serve processes; see tier.go)")
		s3Server  = flag.String("s3-server", "", "with -tier: the versitygw binary (default $MUSER_S3_SERVER, else scripts/s3server.sh's)")
		kvCommit  = flag.Bool("kv-commit", false, "with -remote or -tier: start every muser serve with --kv-commit (each slot's KV memory allocated and written at start)")
	)
	flag.Parse()
	serveKVCommit = *kvCommit
	if *tierMode {
		model := *modelPath
		if model == "" {
			if *keep == "" {
				fmt.Fprintln(os.Stderr, "servebench: -tier needs -model FILE or -keep DIR (the model is built there once)")
				os.Exit(2)
			}
			model = filepath.Join(*keep, "qwen2.5-0.5b-q8_0-seed1.gguf")
			if _, err := os.Stat(model); err != nil {
				logf("building %s", model)
				if err := enginetest.WriteFile(model, enginetest.Qwen25_05B, ggml.TypeQ8_0, 1); err != nil {
					fmt.Fprintln(os.Stderr, "servebench:", err)
					os.Exit(1)
				}
			}
		}
		s3bin := *s3Server
		if s3bin == "" {
			s3bin = os.Getenv("MUSER_S3_SERVER")
		}
		if s3bin == "" {
			out, err := exec.Command("bash", "scripts/s3server.sh").Output()
			if err != nil {
				fmt.Fprintln(os.Stderr, "servebench: scripts/s3server.sh:", err)
				os.Exit(1)
			}
			s3bin = strings.TrimSpace(string(out))
		}
		if err := runTier(*muserBin, model, s3bin, ints(*depthsArg), *threads); err != nil {
			fmt.Fprintln(os.Stderr, "servebench:", err)
			os.Exit(1)
		}
		return
	}
	if *remote {
		model := *modelPath
		if model == "" {
			if *keep == "" {
				fmt.Fprintln(os.Stderr, "servebench: -remote needs -model FILE or -keep DIR (the model is built there once)")
				os.Exit(2)
			}
			model = filepath.Join(*keep, "qwen2.5-0.5b-q8_0-seed1.gguf")
			if _, err := os.Stat(model); err != nil {
				logf("building %s", model)
				if err := enginetest.WriteFile(model, enginetest.Qwen25_05B, ggml.TypeQ8_0, 1); err != nil {
					fmt.Fprintln(os.Stderr, "servebench:", err)
					os.Exit(1)
				}
			}
		}
		if err := runRemote(*muserBin, model, ints(*depthsArg), max(*consumers, 1), *threads, *warmConn, *prodDev); err != nil {
			fmt.Fprintln(os.Stderr, "servebench:", err)
			os.Exit(1)
		}
		return
	}
	var dbs []int
	for _, f := range strings.Split(*batches, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n == 0 {
			fmt.Fprintf(os.Stderr, "servebench: -decode-batches %q: want nonzero integers\n", *batches)
			os.Exit(2)
		}
		dbs = append(dbs, n)
	}
	cpuProfile = *profile
	if err := run(*modelPath, *keep, ints(*depthsArg), ints(*streamArg), dbs, *genTokens, *rounds, *threads); err != nil {
		fmt.Fprintln(os.Stderr, "servebench:", err)
		os.Exit(1)
	}
}

func ints(s string) []int {
	var out []int
	if strings.TrimSpace(s) == "" {
		return nil
	}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "servebench: %q is not a list of positive integers\n", s)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

// cpuProfile, when set, is where the throughput runs' CPU profile goes.
var cpuProfile string

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

func run(modelPath, keep string, depths, streams, decodeBatches []int, gen, rounds, threads int) error {
	tmp, err := os.MkdirTemp("", "servebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if modelPath == "" {
		dir := keep
		if dir == "" {
			dir = tmp
		}
		modelPath = filepath.Join(dir, "qwen2.5-0.5b-q8_0-seed1.gguf")
		if _, err := os.Stat(modelPath); err != nil {
			logf("building %s", modelPath)
			if err := enginetest.WriteFile(modelPath, enginetest.Qwen25_05B, ggml.TypeQ8_0, 1); err != nil {
				return err
			}
		}
	}
	maxDepth := 512
	if len(depths) > 0 {
		maxDepth = slices.Max(depths)
	}
	parallel := 1
	if len(streams) > 0 {
		parallel = slices.Max(streams)
	}
	opts := serve.Options{
		ModelPath: modelPath, Home: filepath.Join(tmp, "home"), Ctx: maxDepth + gen + 64,
		Parallel: parallel, Threads: threads, Logger: slog.New(slog.DiscardHandler),
		MaxQueue: 64,
	}
	b := &bench{opts: opts}
	if err := b.start(); err != nil {
		return err
	}
	defer func() { b.stop() }()

	fmt.Printf("Model: %s (%s), %d threads, %d CPUs, Go %s; load average at start: %s\n\n",
		filepath.Base(modelPath), size(modelPath), threads, runtime.NumCPU(), runtime.Version(), loadavg())

	// Time to first token.
	var rows []ttft
	rng := rand.New(rand.NewPCG(7, 7))
	for _, d := range depths {
		prompt := make([]int32, d)
		for i := range prompt {
			prompt[i] = int32(3 + rng.IntN(150000))
		}
		logf("depth %d: cold", d)
		cpu0 := cpuTime()
		cold, c0, err := b.firstToken(prompt)
		coldCPU := cpuTime() - cpu0
		if err != nil {
			return err
		}
		if c0 != 0 {
			return fmt.Errorf("depth %d: the cold request had %d cached tokens", d, c0)
		}
		if err := b.srv.Sync(context.Background()); err != nil {
			return err
		}
		logf("depth %d: warm", d)
		var warm, warmCPU []time.Duration
		cached := 0
		for range 3 {
			cpu0 := cpuTime()
			w, c, err := b.firstToken(prompt)
			if err != nil {
				return err
			}
			warm, warmCPU, cached = append(warm, w), append(warmCPU, cpuTime()-cpu0), c
		}
		rows = append(rows, ttft{depth: d, cold: cold, warm: median(warm), coldCPU: coldCPU, warmCPU: median(warmCPU), cached: cached})
		logf("depth %d: cold %v (cpu %v), warm %v (cpu %v), %d cached", d, cold, coldCPU, median(warm), median(warmCPU), cached)
	}
	if len(depths) > 0 {
		logf("restart")
		b.stop()
		if err := b.start(); err != nil {
			return err
		}
	}
	rng = rand.New(rand.NewPCG(7, 7))
	for i, d := range depths {
		prompt := make([]int32, d)
		for j := range prompt {
			prompt[j] = int32(3 + rng.IntN(150000))
		}
		var ws, cs []time.Duration
		for range 3 {
			cpu0 := cpuTime()
			w, c, err := b.firstToken(prompt)
			if err != nil {
				return err
			}
			ws, cs = append(ws, w), append(cs, cpuTime()-cpu0)
			rows[i].cachedRestart = c
		}
		rows[i].restart, rows[i].restartCPU = median(ws), median(cs)
	}
	if len(depths) > 0 {
		printTTFT(rows)
	}
	if len(streams) == 0 {
		fmt.Printf("Load average at the end: %s\n", loadavg())
		return nil
	}

	// Decode throughput: for each DecodeBatch, a server of its own; the
	// stream counts alternate within each round.
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	type key struct{ db, n int }
	best, bestCPU := map[key]float64{}, map[key]float64{}
	for round := range rounds {
		for _, db := range decodeBatches {
			b.stop()
			b.opts.DecodeBatch = db
			if err := b.start(); err != nil {
				return err
			}
			for _, n := range streams {
				logf("throughput: decode batch %d, %d streams, round %d", db, n, round+1)
				cpu0 := cpuTime()
				rate, total, err := b.throughput(n, gen, round)
				if err != nil {
					return err
				}
				perCPU := float64(total) / (cpuTime() - cpu0).Seconds()
				k := key{db, n}
				best[k], bestCPU[k] = max(best[k], rate), max(bestCPU[k], perCPU)
				logf("throughput: %.2f tok/s, %.2f tok/cpu-s", rate, perCPU)
			}
		}
	}
	fmt.Println("### Aggregate decode throughput (streamed /completion, ignore_eos)")
	fmt.Println()
	fmt.Println("Tokens/s over the window in which every stream was decoding; tokens per")
	fmt.Println("CPU-second over each whole run (prompts included). Decode batch: the most")
	fmt.Println("decode tokens per Forward call (-1: one call per step, unsplit).")
	fmt.Println()
	fmt.Println("| decode batch | concurrent streams | tokens/s (best of rounds) | vs 1 stream | tokens per CPU-second | vs 1 stream |")
	fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, db := range decodeBatches {
		one := key{db, streams[0]}
		for _, n := range streams {
			k := key{db, n}
			fmt.Printf("| %d | %d | %.1f | **%.2f×** | %.1f | %.2f× |\n", db, n, best[k], best[k]/best[one], bestCPU[k], bestCPU[k]/bestCPU[one])
		}
	}
	fmt.Println()
	fmt.Printf("Load average at the end: %s\n", loadavg())
	return nil
}

type bench struct {
	opts   serve.Options
	srv    *serve.Server
	url    string
	stopFn func()
	// timings is the server's timings object of the last firstToken.
	timings serverTimings
}

// serverTimings is the part of muser's timings object (docs/serve.md,
// "Timings") that splits a time to first token: where the prompt's
// tokens came from and what each phase took, as the server measured it.
type serverTimings struct {
	QueueMS         *float64 `json:"queue_ms"`
	RemotePrefillMS *float64 `json:"remote_prefill_ms"`
	RestoreMS       *float64 `json:"restore_ms"`
	PrefillMS       *float64 `json:"prefill_ms"`
	TTFTMS          *float64 `json:"ttft_ms"`
}

// String lists the phases that ran, in milliseconds.
func (t serverTimings) String() string {
	var parts []string
	for _, f := range []struct {
		name string
		v    *float64
	}{{"queue", t.QueueMS}, {"remote prefill", t.RemotePrefillMS}, {"restore", t.RestoreMS}, {"prefill", t.PrefillMS}, {"ttft", t.TTFTMS}} {
		if f.v != nil {
			parts = append(parts, fmt.Sprintf("%s %.0f ms", f.name, *f.v))
		}
	}
	return "server: " + strings.Join(parts, ", ")
}

func (b *bench) start() error {
	s, err := serve.New(b.opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	b.srv, b.url = s, "http://"+ln.Addr().String()
	b.stopFn = func() { cancel(); <-done }
	return nil
}

func (b *bench) stop() {
	if b.stopFn != nil {
		b.stopFn()
		b.stopFn = nil
	}
}

// firstToken streams a one-token completion of prompt and returns the time
// from sending the request to the first SSE event carrying a token, and the
// cached tokens the usage reports; b.timings keeps the server's timings.
func (b *bench) firstToken(prompt []int32) (time.Duration, int, error) {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 1, "temperature": 0, "stream": true,
		"stream_options": map[string]any{"include_usage": true}, "timings": true})
	b.timings = serverTimings{}
	start := time.Now()
	resp, err := http.Post(b.url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(resp.Body)
		return 0, 0, fmt.Errorf("HTTP %d: %s", resp.StatusCode, msg)
	}
	var first time.Duration
	cached := -1
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				Details struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
			Timings *serverTimings `json:"timings"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return 0, 0, err
		}
		if first == 0 && len(ev.Choices) > 0 {
			first = time.Since(start)
		}
		if ev.Usage != nil {
			cached = ev.Usage.Details.Cached
		}
		if ev.Timings != nil {
			b.timings = *ev.Timings
		}
	}
	if first == 0 || cached < 0 {
		return 0, 0, fmt.Errorf("no token or no usage in the stream")
	}
	return first, cached, sc.Err()
}

// throughput runs n concurrent streams of gen tokens and returns the
// aggregate rate over the window in which all n were decoding: from the
// last stream's first token to the first stream's last token, counting
// the tokens every stream received in that window.
func (b *bench) throughput(n, gen, round int) (float64, int, error) {
	times := make([][]time.Time, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			prompt := make([]int32, 32)
			rng := rand.New(rand.NewPCG(uint64(round), uint64(i)))
			for j := range prompt {
				prompt[j] = int32(3 + rng.IntN(150000))
			}
			body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": gen, "temperature": 0.8,
				"seed": i, "ignore_eos": true, "stream": true, "cache_prompt": false})
			resp, err := http.Post(b.url+"/completion", "application/json", bytes.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				data, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok {
					continue
				}
				var ev struct {
					Stop bool `json:"stop"`
				}
				json.Unmarshal([]byte(data), &ev)
				if !ev.Stop {
					times[i] = append(times[i], time.Now())
				}
			}
			if len(times[i]) != gen {
				errs <- fmt.Errorf("stream %d received %d tokens, want %d", i, len(times[i]), gen)
				return
			}
			errs <- sc.Err()
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			return 0, 0, err
		}
	}
	var t0, t1 time.Time
	for i, ts := range times {
		if i == 0 || ts[0].After(t0) {
			t0 = ts[0]
		}
		if i == 0 || ts[len(ts)-1].Before(t1) {
			t1 = ts[len(ts)-1]
		}
	}
	count := 0
	for _, ts := range times {
		for _, t := range ts {
			if t.After(t0) && !t.After(t1) {
				count++
			}
		}
	}
	if !t1.After(t0) || count == 0 {
		return 0, 0, fmt.Errorf("%d streams never decoded together", n)
	}
	return float64(count) / t1.Sub(t0).Seconds(), n * gen, nil
}

type ttft struct {
	depth                        int
	cold, warm, restart          time.Duration
	coldCPU, warmCPU, restartCPU time.Duration
	cached, cachedRestart        int
}

func printTTFT(rows []ttft) {
	fmt.Println("### Time to first token over HTTP (streamed /v1/completions, prompt as token ids)")
	fmt.Println()
	fmt.Println("Wall-clock time from sending the request to the first streamed token, and the")
	fmt.Println("process CPU time over the same request (robust to other load on the machine).")
	fmt.Println()
	fmt.Println("| prompt tokens | cold | warm (same prompt again) | warm after restart | cached tokens (warm / after restart) | cold / warm | cold / warm after restart |")
	fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		fmt.Printf("| %d | %s | %s | %s | %d / %d | **%.1f×** | %.1f× |\n", r.depth, dur(r.cold), dur(r.warm), dur(r.restart),
			r.cached, r.cachedRestart, r.cold.Seconds()/r.warm.Seconds(), r.cold.Seconds()/r.restart.Seconds())
	}
	fmt.Println()
	fmt.Println("| prompt tokens | cold CPU | warm CPU | warm after restart CPU | cold / warm (CPU) |")
	fmt.Println("| ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		fmt.Printf("| %d | %s | %s | %s | %.1f× |\n", r.depth, dur(r.coldCPU), dur(r.warmCPU), dur(r.restartCPU),
			r.coldCPU.Seconds()/r.warmCPU.Seconds())
	}
	fmt.Println()
}

// cpuTime returns the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func dur(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000)
}

func size(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.0f MB", float64(fi.Size())/1e6)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
