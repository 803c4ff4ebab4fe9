package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/serve/draftlane"
	"github.com/muserhq/muser/serve/sched"
)

// draftBenchWarmup is how many generated tokens the speculative-decoding
// benchmark leaves out of its decode rate: the first steps include the
// draft model's catching up with the whole context.
const draftBenchWarmup = 8

// draftBenchResult is what `muser bench --draft-* --json` prints.
type draftBenchResult struct {
	Engine     string `json:"engine"`
	Model      string `json:"model"`
	Device     string `json:"device"`
	Threads    int    `json:"threads"`
	Lane       string `json:"lane"`
	DraftModel string `json:"draft_model,omitempty"`
	DraftBlock string `json:"draft_block,omitempty"`
	// DraftBlockDevice is where the block drafter computes: "cpu" or the
	// GPU's name.
	DraftBlockDevice string  `json:"draft_block_device,omitempty"`
	DraftWindow      int     `json:"draft_window,omitempty"`
	IgnoreCost       bool    `json:"draft_ignore_cost,omitempty"`
	Text             string  `json:"text"`
	ContextTokens    int     `json:"context_tokens"`
	GenTokens        int     `json:"gen_tokens"`
	Temperature      float64 `json:"temperature"`
	PlainTokS        float64 `json:"plain_decode_tok_s"`
	DraftTokS        float64 `json:"draft_decode_tok_s"`
	Speedup          float64 `json:"speedup"`
	// PlainCPU and DraftCPU are the process's CPU seconds (user and
	// system, getrusage) during the fastest run of each.
	PlainCPU float64 `json:"plain_cpu_s"`
	DraftCPU float64 `json:"draft_cpu_s"`
	// PlainWall and DraftWall are those runs' seconds over the measured
	// tokens.
	PlainWall     float64 `json:"plain_wall_s"`
	DraftWall     float64 `json:"draft_wall_s"`
	Drafted       int     `json:"drafted"`
	Accepted      int     `json:"accepted"`
	Acceptance    float64 `json:"acceptance_rate"`
	TokensPerStep float64 `json:"tokens_per_step"`
	// Identical is true: the benchmark fails when the outputs differ.
	Identical bool `json:"identical"`
}

// runDraftBench decodes --gen-tokens after a --prompt-tokens context taken
// from --text, with the scheduler (muser's one generation driver) without
// and with the draft lane, alternating, and reports the fastest of --reps
// each. The outputs must be identical token for token.
// The caller has checked --text and --gen-tokens.
func runDraftBench(ctx context.Context, o *benchOptions, dev engine.Device) (*draftBenchResult, error) {
	m, err := engine.Open(o.model, engine.Options{Device: dev, Mapped: o.mmap})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	tok, err := tokenizer.FromGGUF(m.File().Meta)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.model, err)
	}
	b, err := os.ReadFile(o.text)
	if err != nil {
		return nil, err
	}
	all, err := tok.Encode(string(b), tokenizer.EncodeOptions{AddSpecial: true})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.text, err)
	}
	if len(all) < o.prompt {
		return nil, fmt.Errorf("%s: %d tokens, fewer than --prompt-tokens %d", o.text, len(all), o.prompt)
	}
	prompt := all[:o.prompt]
	drafter, err := o.draft.open(m, m.KVType(), o.threads, tok)
	if err != nil {
		return nil, err
	}
	defer drafter.Close()
	lanes := []sched.Drafter{drafter}
	if c, ok := drafter.(*sched.ChainDrafter); ok {
		lanes = c.Lanes()
	}
	blockDevice := ""
	for _, l := range lanes {
		if bd, ok := l.(*draftlane.BlockDrafter); ok {
			blockDevice = bd.Device()
		}
		if md, ok := l.(*sched.ModelDrafter); ok {
			// The whole context at once, inside the left-out first
			// tokens: the rate measures drafting, not catching up.
			md.Chunk = o.prompt + o.gen
			md.Window = o.window
		}
	}
	bans := map[int32]float64{}
	for _, id := range tok.EOGs() {
		bans[id] = -100
	}
	params := sample.Params{LogitBias: bans, Seed: o.seed}
	if o.temp > 0 {
		params = sample.Defaults(o.seed)
		params.Temperature, params.LogitBias = o.temp, bans
	}
	res := &draftBenchResult{
		Engine: m.Numerics(), Model: o.model, Device: dev.Name(), Threads: o.threads, Lane: drafter.Name(),
		DraftModel: o.draft.model, DraftBlock: o.draft.block, DraftBlockDevice: blockDevice, DraftWindow: o.window, IgnoreCost: o.ignoreCost, Text: o.text, ContextTokens: o.prompt, GenTokens: o.gen, Temperature: o.temp, Identical: true,
	}
	var want []int32
	var bestPlain, bestDraft time.Duration
	for r := 0; r < o.reps; r++ {
		for _, d := range []sched.Drafter{nil, drafter} {
			s, err := sched.New(sched.Config{Model: m, Tokenizer: tok, Slots: 1, Ctx: o.prompt + o.gen + 1,
				Drafter: d, DraftMax: o.draft.max, DraftIgnoreCost: o.ignoreCost})
			if err != nil {
				return nil, err
			}
			task, err := s.Submit(ctx, &sched.Request{ID: "bench", Prompt: prompt, MaxTokens: o.gen, Sampling: params,
				Logprobs: -1, NoCache: true})
			if err != nil {
				s.Close(ctx)
				return nil, err
			}
			var times []time.Time
			var cpuAt []float64 // CPU seconds when each token came
			for {
				evs, done, err := task.Next(ctx)
				if err != nil {
					s.Close(ctx)
					return nil, err
				}
				c := cpuSeconds()
				for _, ev := range evs {
					if ev.Token != sched.NoToken {
						times = append(times, ev.Time)
						cpuAt = append(cpuAt, c)
					}
				}
				if done {
					break
				}
			}
			out, terr := task.Result(), task.Err()
			stats := s.DraftStats()
			if err := s.Close(ctx); err != nil {
				return nil, err
			}
			if terr != nil {
				return nil, terr
			}
			if len(times) != o.gen {
				return nil, fmt.Errorf("generated %d tokens, want %d", len(times), o.gen)
			}
			if want == nil {
				want = out.Generated
			} else if !slices.Equal(out.Generated, want) {
				return nil, fmt.Errorf("the %s lane's output differs from plain decoding's (a bug: speculation must not change output)", drafter.Name())
			}
			el := times[len(times)-1].Sub(times[draftBenchWarmup])
			cpu := cpuAt[len(cpuAt)-1] - cpuAt[draftBenchWarmup]
			if d == nil {
				if r == 0 || el < bestPlain {
					bestPlain, res.PlainCPU = el, cpu
				}
				continue
			}
			if r == 0 || el < bestDraft {
				bestDraft, res.DraftCPU = el, cpu
			}
			res.Drafted, res.Accepted = int(stats.Drafted), int(stats.Accepted)
			res.Acceptance, res.TokensPerStep = stats.AcceptanceRate(), stats.TokensPerStep()
		}
	}
	n := float64(o.gen - 1 - draftBenchWarmup)
	res.PlainTokS, res.DraftTokS = n/bestPlain.Seconds(), n/bestDraft.Seconds()
	res.PlainWall, res.DraftWall = bestPlain.Seconds(), bestDraft.Seconds()
	res.Speedup = res.DraftTokS / res.PlainTokS
	return res, nil
}

func printDraftBench(w io.Writer, r *draftBenchResult) {
	lane := r.Lane
	if f := r.DraftModel + r.DraftBlock; f != "" {
		lane += " (" + f + ")"
	}
	if r.DraftBlockDevice != "" {
		lane += " on " + r.DraftBlockDevice
	}
	fmt.Fprintf(w, "model      %s\ndevice     %s\nthreads    %d\ntext       %s\ncontext    %d tokens, then %d generated (temperature %g)\n",
		r.Model, r.Device, r.Threads, r.Text, r.ContextTokens, r.GenTokens, r.Temperature)
	fmt.Fprintf(w, "plain      %.2f tok/s decode (%.2f s, %.2f CPU s)\ndraft      %.2f tok/s decode (%.2f s, %.2f CPU s), %s lane: %.2fx\n",
		r.PlainTokS, r.PlainWall, r.PlainCPU, r.DraftTokS, r.DraftWall, r.DraftCPU, lane, r.Speedup)
	fmt.Fprintf(w, "accepted   %d of %d draft tokens (%.1f%%), %.2f tokens per verification step\noutput     identical to plain decoding\n",
		r.Accepted, r.Drafted, 100*r.Acceptance, r.TokensPerStep)
}

// cpuSeconds returns the process's user and system CPU seconds so far (0
// where getrusage fails).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
