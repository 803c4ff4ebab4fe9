package sched

import (
	"context"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/tokenizer"
)

// benchLane proposes, from the plain output, two true tokens then a wrong
// one (a verification step of four rows that accepts two), or nothing
// (plain decode steps); want says whether it asks for hidden states.
type benchLane struct {
	want, none bool
	seq        []int32 // prompt and plain output
	vocab      int32
}

func (l *benchLane) Name() string      { return "bench" }
func (l *benchLane) WantsHidden() bool { return l.want }
func (l *benchLane) Forget(int)        {}
func (l *benchLane) Close() error      { return nil }
func (l *benchLane) Draft(_ context.Context, reqs []DraftRequest) error {
	for i := range reqs {
		r := &reqs[i]
		r.Tokens = r.Tokens[:0]
		if l.none || (l.want && r.Hidden == nil) {
			continue
		}
		n := len(r.History)
		for j := range r.Max {
			t := int32(1)
			if n+j < len(l.seq) {
				t = l.seq[n+j]
			}
			if j == 2 {
				t = (t + 1) % l.vocab
			}
			r.Tokens = append(r.Tokens, t)
		}
	}
	return nil
}

// cpuSeconds returns the process's user and system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkDraftHidden measures what asking the engine for hidden states
// costs a lane: one request of 96 greedy tokens after a 200-token prompt,
// with verification steps of four rows ("verify") or plain decode steps
// ("plain"). Each iteration runs the request twice, the lane wanting
// hidden states and not, in alternating order, on two schedulers of the
// same model; the outputs must be plain decoding's. It reports the wall
// and CPU seconds (getrusage) of each and their ratios (hidden/none). The
// target is the embedded default model, or the GGUF named by
// MUSER_BENCH_TARGET.
func BenchmarkDraftHidden(b *testing.B) {
	var e *env
	if path := os.Getenv("MUSER_BENCH_TARGET"); path != "" {
		m, err := engine.Open(path, engine.Options{Device: cpu.New(cpu.Options{Threads: 2})})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		tok, err := tokenizer.FromGGUF(m.File().Meta)
		if err != nil {
			b.Fatal(err)
		}
		e = &env{model: m, tok: tok}
	} else {
		e = loadDefault(b)
	}
	prompt := e.encode(b, infertest.Story(4, 400))[:200]
	req := Request{Prompt: prompt, MaxTokens: 96, Sampling: sample.Params{LogitBias: eogBans(e)}, Logprobs: -1, NoCache: true}
	mk := func(d Drafter) *Scheduler {
		s, err := New(Config{Model: e.model, Tokenizer: e.tok, Drafter: d, DraftMax: 3, DraftIgnoreCost: true, Ctx: 512})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	plain := mk(nil)
	want := runAll(b, plain, []specCase{{req: req}})[0]
	plain.Close(context.Background())
	full := append(slices.Clone(prompt), want.res.Generated...)
	V := int32(e.model.Config().Vocab)
	for _, steps := range []string{"verify", "plain"} {
		b.Run(steps, func(b *testing.B) {
			var (
				sch       [2]*Scheduler // [0]: no hidden states, [1]: hidden states
				wall, cpu [2]float64
			)
			for i := range sch {
				sch[i] = mk(&benchLane{want: i == 1, none: steps == "plain", seq: full, vocab: V})
				defer sch[i].Close(context.Background())
			}
			round := 0
			for b.Loop() {
				for k := range 2 {
					i := (round + k) % 2
					t0, c0 := time.Now(), cpuSeconds()
					got := runAll(b, sch[i], []specCase{{req: req}})[0]
					wall[i] += time.Since(t0).Seconds()
					cpu[i] += cpuSeconds() - c0
					if !slices.Equal(got.res.Generated, want.res.Generated) {
						b.Fatalf("the lane's output differs from plain decoding's")
					}
				}
				round++
			}
			n := float64(b.N)
			b.ReportMetric(wall[0]/n, "none-s/op")
			b.ReportMetric(wall[1]/n, "hidden-s/op")
			b.ReportMetric(cpu[0]/n, "none-cpu-s/op")
			b.ReportMetric(cpu[1]/n, "hidden-cpu-s/op")
			b.ReportMetric(wall[1]/wall[0], "wall-ratio")
			b.ReportMetric(cpu[1]/cpu[0], "cpu-ratio")
			b.ReportMetric(float64(sch[1].DraftStats().Steps)/n, "verify-steps/op")
		})
	}
}
