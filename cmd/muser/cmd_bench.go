package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cuda"
	"github.com/muserhq/muser/infer/sample"
)

// benchOptions are the flags of `muser bench`.
type benchOptions struct {
	model   string
	threads int
	prompt  int
	gen     int
	reps    int
	json    bool
	cpuProf string
	device  string
	mmap    bool
	profile bool
	graphs  bool
	early   bool
	// graphLayers is cuda.Options.GraphLayers.
	graphLayers int
	// fusedAttn is cuda.Options.FusedAttention.
	fusedAttn int
	// Speculative decoding (cmd_bench_draft.go).
	draft draftOptions
	text  string
	temp  float64
	seed  uint64
	// window is the draft model's window (sched.ModelDrafter.Window);
	// ignoreCost adapts the draft length to acceptance alone.
	window     int
	ignoreCost bool
}

func (o *benchOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.model, "model", "m", "", "GGUF model file (required)")
	fs.IntVarP(&o.threads, "threads", "t", runtime.NumCPU(), "worker threads")
	addMmapFlag(fs, &o.mmap)
	fs.IntVar(&o.prompt, "prompt-tokens", 512, "prompt length for the prefill measurement")
	fs.IntVar(&o.gen, "gen-tokens", 128, "tokens decoded one at a time for the decode measurement")
	fs.IntVar(&o.reps, "reps", 3, "repetitions; the fastest is reported")
	fs.BoolVar(&o.json, "json", false, "print one JSON object")
	addDeviceFlag(fs, &o.device)
	fs.BoolVar(&o.profile, "profile", false, "with --device cuda: time every kernel (device events) and print where the time went, on stderr")
	fs.BoolVar(&o.graphs, "cuda-graphs", true, "with --device cuda: run forward passes of at most 64 rows (decode) as CUDA graphs; =false launches every kernel from the host (the same kernels)")
	fs.IntVar(&o.graphLayers, "cuda-graph-layers", cuda.DefaultGraphLayers, "with --device cuda and graphs: layers per graph launch (the GPU runs the first while the host records the next); at least the model's layers for one graph a pass")
	fs.IntVar(&o.fusedAttn, "cuda-fused-attention", cuda.DefaultFusedAttention, "with --device cuda: the longest context (positions) at which a decode step attends in one launch a layer; longer contexts launch the separate attention kernels; -1 never fuses (the same results)")
	fs.BoolVar(&o.early, "cuda-early-launch", true, "with --device cuda and graphs: let each kernel of a graph start while those it waits for finish (programmatic dependent launch); =false starts each only once they have ended (the same results)")
	fs.StringVar(&o.cpuProf, "cpuprofile", "", "write a CPU profile of the measured runs to this file (go tool pprof), once the bench has succeeded")
	o.draft.AddFlags(fs)
	fs.StringVar(&o.text, "text", "", "with a draft lane: the text file whose first --prompt-tokens tokens are the context")
	fs.Float64Var(&o.temp, "temperature", 0, "with a draft lane: sampling temperature (0: greedy)")
	fs.Uint64Var(&o.seed, "seed", 1, "with a draft lane: sampling seed")
	fs.IntVar(&o.window, "draft-window", 0, "with --draft-model: the most tokens the draft model sees (the history's first and its latest; 0: the draft model's training context, -1: the whole history)")
	fs.BoolVar(&o.ignoreCost, "draft-ignore-cost", false, "with a draft lane: adapt the draft length to the acceptance alone, drafting at every step, as if verifying and drafting cost nothing")
}

// benchResult is what `muser bench --json` prints; scripts/bench.sh reads
// it beside node-llama-cpp's equivalent (scripts/parity/engine-bench.mjs).
type benchResult struct {
	Engine       string  `json:"engine"`
	Model        string  `json:"model"`
	Threads      int     `json:"threads"`
	Device       string  `json:"device"`
	PromptTokens int     `json:"prompt_tokens"`
	GenTokens    int     `json:"gen_tokens"`
	PrefillTokS  float64 `json:"prefill_tok_s"`
	DecodeTokS   float64 `json:"decode_tok_s"`
	PeakRSS      int64   `json:"peak_rss_bytes"`
	FileBytes    int64   `json:"file_bytes"`
	// Weights says how the model file is held: "resident" or "mapped"
	// (gguf.Memory).
	Weights string `json:"weights"`
	KVBytes int64  `json:"kv_bytes"`
	// DecodeDigest is the FNV-64a of the decoded tokens (little-endian
	// int32s) of the last repetition: runs that decode the same tokens
	// print the same digest (graphs on and off, say).
	DecodeDigest string `json:"decode_digest"`
	// With --device cuda, per decode step of the last repetition: the
	// kernels run and the calls that launched them (a graph launch
	// counts once; Device.Launches).
	DecodeKernels     float64 `json:"decode_kernels_per_step,omitempty"`
	DecodeHostLaunchs float64 `json:"decode_host_launches_per_step,omitempty"`
}

func newBenchCommand() *command {
	o := &benchOptions{}
	cmd := &command{
		name:    "bench",
		summary: "measure prefill and decode speed of a model",
		help: `Loads the model and measures, in one sequence emptied before each
repetition (its KV memory allocated and written before the first, as a
muser serve slot keeps its memory between requests and as llama.cpp
allocates and clears its KV buffer when it creates a context):
  prefill  the prompt (token i = (1 + 7919·i) mod vocab) in one batch;
  decode   --gen-tokens tokens fed one at a time, each the greedy choice
           after the previous one, following all but the last prompt token.
The fastest of --reps repetitions is reported, with the peak resident set
size of the process (VmHWM: the weights count in full, read into resident
memory by the CPU engine, or, with --mmap, the file's pages once touched).
scripts/parity/engine-bench.mjs runs the same protocol on llama.cpp (which
maps the file); scripts/bench.sh runs both and writes docs/benchmarks.md.

With --draft-lookup, --draft-model FILE or --draft-block FILE it measures speculative decoding
instead: the first --prompt-tokens tokens of --text as the context, then
--gen-tokens generated (end-of-generation banned) by the scheduler without
and with the draft lane, alternating, the fastest of --reps each. The decode
rate leaves out the first 8 tokens (the draft model catching up with the
context, in one step here). The two outputs must be identical, or the benchmark fails.`,
		flags: o.AddFlags,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) > 0 {
			return usagef(cmd, "takes no arguments, got %q", args[0])
		}
		if o.model == "" {
			return usagef(cmd, "--model is required")
		}
		if o.threads <= 0 || o.prompt < 2 || o.gen < 1 || o.reps < 1 {
			return usagef(cmd, "--threads, --gen-tokens and --reps must be positive and --prompt-tokens at least 2")
		}
		if err := checkSampling(cmd, sample.Params{Temperature: o.temp}); err != nil {
			return err
		}
		if o.window < -1 {
			return usagef(cmd, "--draft-window %d: want -1 (the whole history), 0 (the draft model's training context) or more", o.window)
		}
		kind, ordinal, err := parseDevice(o.device)
		if err != nil {
			return usagef(cmd, "%v", err)
		}
		if _, err := os.Stat(o.model); err != nil {
			return err
		}
		if o.draft.enabled() {
			if err := o.draft.check(); err != nil {
				return usagef(cmd, "%v", err)
			}
			if o.text == "" {
				return usagef(cmd, "--text is required with --draft-lookup, --draft-model or --draft-block")
			}
			if o.gen <= draftBenchWarmup+1 {
				return usagef(cmd, "--gen-tokens %d: want more than %d with a draft lane", o.gen, draftBenchWarmup+1)
			}
		}
		// The profile starts once every flag checked out, and its file is
		// put in place only when the bench succeeds: a bad command line or
		// a failed bench leaves an existing file as it was.
		if o.cpuProf == "" {
			return benchOn(ctx, env, o, kind, ordinal)
		}
		stop, err := startCPUProfile(o.cpuProf)
		if err != nil {
			return err
		}
		return stop(benchOn(ctx, env, o, kind, ordinal))
	}
	return cmd
}

// benchOn runs the benchmark o describes on the device kind:ordinal and
// prints its result.
func benchOn(ctx context.Context, env *cliEnv, o *benchOptions, kind string, ordinal int) error {
	dev, closeDev, err := openDeviceWith(kind, ordinal, o.threads, cuda.Options{Profile: o.profile, NoGraphs: !o.graphs, NoEarlyLaunch: !o.early, GraphLayers: o.graphLayers, FusedAttention: o.fusedAttn})
	if err != nil {
		return err
	}
	defer closeDev()
	if o.draft.enabled() {
		res, err := runDraftBench(ctx, o, dev)
		if err != nil {
			return err
		}
		printDeviceProfile(env.stderr, o, dev)
		if o.json {
			return printJSONLine(env.stdout, res)
		}
		printDraftBench(env.stdout, res)
		return nil
	}
	res, err := runBench(ctx, o, dev)
	if err != nil {
		return err
	}
	printDeviceProfile(env.stderr, o, dev)
	if o.json {
		return printJSONLine(env.stdout, res)
	}
	fmt.Fprintf(env.stdout, "model    %s (%s)\ndevice   %s\nthreads  %d\nprefill  %.1f tok/s (%d tokens)\ndecode   %.2f tok/s (%d tokens)\npeak RSS %.1f MiB (file %.1f MiB, KV %.1f MiB)\n",
		res.Model, humanBytes(res.FileBytes), res.Device, res.Threads, res.PrefillTokS, res.PromptTokens, res.DecodeTokS, res.GenTokens,
		float64(res.PeakRSS)/(1<<20), float64(res.FileBytes)/(1<<20), float64(res.KVBytes)/(1<<20))
	if res.DecodeKernels > 0 {
		fmt.Fprintf(env.stdout, "launches %.0f kernels per decode step in %.0f host launches\n", res.DecodeKernels, res.DecodeHostLaunchs)
	}
	return nil
}

func runBench(ctx context.Context, o *benchOptions, dev engine.Device) (*benchResult, error) {
	m, err := engine.Open(o.model, engine.Options{Device: dev, Mapped: o.mmap})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	V := m.Config().Vocab
	prompt := make([]int32, o.prompt)
	for i := range prompt {
		prompt[i] = int32((1 + 7919*int64(i)) % int64(V))
	}
	res := &benchResult{
		Engine: m.Numerics(), Model: o.model, Threads: o.threads, Device: dev.Name(),
		PromptTokens: o.prompt, GenTokens: o.gen, FileBytes: m.File().Size(), Weights: m.File().Memory().String(),
	}
	seq, err := m.NewSequence(o.prompt + o.gen + 8)
	if err != nil {
		return nil, err
	}
	defer seq.Close()
	if err := seq.Commit(); err != nil {
		return nil, err
	}
	var bestPrefill, bestDecode time.Duration
	for r := 0; r < o.reps; r++ {
		if err := seq.Truncate(0); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := m.Forward(ctx, []engine.Step{{Seq: seq, Tokens: prompt, Output: engine.OutputLast}}); err != nil {
			return nil, err
		}
		if d := time.Since(t0); r == 0 || d < bestPrefill {
			bestPrefill = d
		}
		if err := seq.Truncate(o.prompt - 1); err != nil {
			return nil, err
		}
		st := []engine.Step{{Seq: seq, Tokens: prompt[o.prompt-1:], Output: engine.OutputLast}}
		cd, _ := dev.(*cuda.Device)
		var l0 cuda.Launches
		if cd != nil {
			l0 = cd.Launches()
		}
		h := fnv.New64a()
		t0 = time.Now()
		for range o.gen {
			if err := m.Forward(ctx, st); err != nil {
				return nil, err
			}
			tok := argmax(st[0].Logits)
			st[0].Tokens = []int32{tok}
			h.Write(binary.LittleEndian.AppendUint32(nil, uint32(tok)))
		}
		if d := time.Since(t0); r == 0 || d < bestDecode {
			bestDecode = d
		}
		res.DecodeDigest = fmt.Sprintf("%016x", h.Sum64())
		if cd != nil {
			l := cd.Launches()
			steps := float64(l.Passes - l0.Passes)
			res.DecodeKernels = float64(l.Direct-l0.Direct+l.GraphKernels-l0.GraphKernels) / steps
			res.DecodeHostLaunchs = float64(l.Direct-l0.Direct+l.GraphRuns-l0.GraphRuns) / steps
		}
		res.KVBytes = seq.KV().Bytes()
	}
	res.PrefillTokS = float64(o.prompt) / bestPrefill.Seconds()
	res.DecodeTokS = float64(o.gen) / bestDecode.Seconds()
	res.PeakRSS = peakRSS()
	return res, nil
}

// printJSONLine writes v to w as one line of JSON. A value JSON cannot
// hold (a rate that is not finite) is an error, not an empty line.
func printJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func argmax(v []float32) int32 {
	best, bv := 0, v[0]
	for i, x := range v {
		if x > bv {
			best, bv = i, x
		}
	}
	return int32(best)
}

// peakRSS returns the process's peak resident set size in bytes: VmHWM
// from /proc/self/status where there is one, else getrusage's maxrss.
func peakRSS() int64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				f := strings.Fields(rest)
				if len(f) == 2 && f[1] == "kB" {
					if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
						return n << 10
					}
				}
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		return int64(ru.Maxrss) << 10 // kilobytes on Linux
	}
	return 0
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// printDeviceProfile prints the kernels' device times of a CUDA device
// opened with --profile; nothing for another device or without it.
func printDeviceProfile(w io.Writer, o *benchOptions, dev engine.Device) {
	if d, ok := dev.(*cuda.Device); ok && o.profile {
		printProfile(w, d.Profile())
	}
}

// printProfile prints where a GPU's device time went, kernel by kernel.
func printProfile(w io.Writer, kts []cuda.KernelTime) {
	var total time.Duration
	for _, kt := range kts {
		total += kt.Time
	}
	fmt.Fprintf(w, "device time by kernel (all repetitions): %v\n", total.Round(time.Microsecond))
	for _, kt := range kts {
		fmt.Fprintf(w, "  %-28s %8d launches %12v %5.1f%%\n", kt.Kernel, kt.Launches, kt.Time.Round(time.Microsecond), 100*float64(kt.Time)/float64(max(total, 1)))
	}
}

// startCPUProfile profiles the process's CPU into a temporary file beside
// path until the returned function is called with the outcome of the
// profiled work: nil puts the profile at path (replacing a file there),
// an error removes it, leaving path as it was. stop returns the outcome,
// or the failure to put the profile in place.
func startCPUProfile(path string) (stop func(error) error, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, &outputError{path: path, err: err}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return func(outcome error) error {
		pprof.StopCPUProfile()
		err := f.Chmod(0o644)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if outcome != nil {
			os.Remove(f.Name())
			return outcome
		}
		if err == nil {
			err = os.Rename(f.Name(), path)
		}
		if err != nil {
			os.Remove(f.Name())
			return &outputError{path: path, err: err}
		}
		return nil
	}, nil
}
