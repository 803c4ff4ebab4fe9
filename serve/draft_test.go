package serve

import (
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/blockdraft/blockdrafttest"
	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
)

// completionBody strips what varies between two runs of the same request
// (timings, ids, clock times) from a /completion or /v1/completions
// answer, keeping the tokens, text, probabilities and finish reasons.
func completionBody(t *testing.T, b []byte) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	for _, k := range []string{"timings", "id", "created", "id_slot", "tokens_cached", "usage"} {
		delete(m, k)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestSpeculativeServe serves with each draft lane and checks that the
// llama.cpp and OpenAI completion routes answer exactly as without one,
// and that /metrics counts the drafts.
func TestSpeculativeServe(t *testing.T) {
	bodies := []string{
		`{"prompt":"Once upon a time, there was a little girl named Lily. Lily","n_predict":40,"temperature":0,"seed":1,"n_probs":2}`,
		`{"prompt":"One day, a big dog saw a cat. The dog","n_predict":40,"temperature":0.9,"seed":7,"n_probs":1}`,
		`{"prompt":"Tom had a red ball. Tom had a red","n_predict":24,"temperature":0.7,"seed":3,"stop":["ball"]}`,
	}
	oai := []string{
		`{"prompt":"The sun was shining. The sun","max_tokens":30,"temperature":0.8,"seed":5,"logprobs":2}`,
	}
	plain := startServer(t, nil)
	want := make([]string, 0, len(bodies)+len(oai))
	ask := func(ts *testServer, path, body string) string {
		resp, b := ts.post(t, path, body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: status %d: %s", path, body, resp.StatusCode, b)
		}
		return completionBody(t, b)
	}
	for _, b := range bodies {
		want = append(want, ask(plain, "/completion", b))
	}
	for _, b := range oai {
		want = append(want, ask(plain, "/v1/completions", b))
	}
	block := filepath.Join(t.TempDir(), "block.gguf")
	if err := blockdrafttest.WriteFor(block, modelPath, blockdrafttest.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	for _, lane := range []struct {
		name string
		mod  func(*Options)
		// random: a block drafter of random weights, whose drafts may all
		// be refused.
		random bool
	}{
		{"lookup", func(o *Options) { o.DraftLookup = true }, false},
		{"model", func(o *Options) { o.DraftModelPath = modelPath; o.DraftMax = 4 }, false},
		{"lookup+model", func(o *Options) { o.DraftModelPath, o.DraftLookup, o.DraftMax = modelPath, true, 4 }, false},
		{"block", func(o *Options) { o.DraftBlockPath = block }, true},
	} {
		t.Run(lane.name, func(t *testing.T) {
			// Drafting at every step, whatever it costs: the metrics
			// below must count drafts.
			ts := startServer(t, func(o *Options) { lane.mod(o); o.Parallel, o.DraftIgnoreCost = 2, true })
			var got []string
			for _, b := range bodies {
				got = append(got, ask(ts, "/completion", b))
			}
			for _, b := range oai {
				got = append(got, ask(ts, "/v1/completions", b))
			}
			for i := range want {
				if got[i] != want[i] {
					n := 0
					for n < min(len(got[i]), len(want[i])) && got[i][n] == want[i][n] {
						n++
					}
					t.Errorf("request %d: answers differ from byte %d:\n got …%.200s\nwant …%.200s", i, n, got[i][n:], want[i][n:])
				}
			}
			_, m := ts.do(t, http.MethodGet, "/metrics", "")
			drafted := metricValue(t, m, "muser_draft_tokens_total")
			accepted := metricValue(t, m, "muser_draft_accepted_tokens_total")
			steps := metricValue(t, m, "muser_draft_verify_steps_total")
			toks := metricValue(t, m, "muser_draft_verify_tokens_total")
			if drafted == 0 || (accepted == 0 && !lane.random) || accepted > drafted || toks != steps+accepted {
				t.Errorf("metrics: %v drafted, %v accepted, %v steps, %v tokens; want some accepted of the drafted and tokens = steps + accepted",
					drafted, accepted, steps, toks)
			}
			if lane.random {
				return
			}
			if r := metricValue(t, m, "muser_draft_acceptance_ratio"); r != accepted/drafted {
				t.Errorf("acceptance ratio %v, want %v", r, accepted/drafted)
			}
			if r := metricValue(t, m, "muser_draft_tokens_per_step"); r <= 1 {
				t.Errorf("tokens per step %v, want more than 1", r)
			}
		})
	}
}

// TestDraftOptions checks the draft options New refuses, by the option
// they name.
func TestDraftOptions(t *testing.T) {
	needModel(t)
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	defBlock := filepath.Join(t.TempDir(), "block.gguf")
	if err := blockdrafttest.WriteFile(defBlock, f, blockdrafttest.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		mod    func(*Options)
		option string
		reason string
	}{
		{"tokenizer mismatch", func(o *Options) {
			o.ModelPath, o.Model, o.ModelName = "", f, defaultmodel.Name
			o.DraftModelPath = modelPath
		}, "--draft-model", "vocabulary size is 2048 in the model, 512 in the draft model"},
		{"negative max", func(o *Options) { o.DraftLookup, o.DraftMax = true, -1 }, "--draft-max", "want 1 or more"},
		// A block drafter made for the default model (hidden size 256).
		{"block for another model", func(o *Options) { o.DraftBlockPath = defBlock }, "--draft-block", "hidden size is 256 in the drafter, 64 in the model"},
		{"model and block", func(o *Options) { o.DraftModelPath, o.DraftBlockPath = modelPath, defBlock }, "--draft-block", "cannot be combined"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := Options{ModelPath: modelPath, Home: t.TempDir(), StoreNoSync: true, Threads: 1, Addr: "127.0.0.1:0"}
			c.mod(&opts)
			s, err := New(opts)
			if err == nil {
				s.Close()
				t.Fatal("got no error")
			}
			var oe *OptionError
			if !errors.As(err, &oe) || oe.Option != c.option || !strings.Contains(oe.Reason, c.reason) {
				t.Errorf("got %v, want an *OptionError for %s saying %q", err, c.option, c.reason)
			}
			if !errors.Is(err, ErrOptions) {
				t.Errorf("got %v, want it to wrap ErrOptions", err)
			}
		})
	}
}

// binderDevice is a CPU device that also runs block drafters
// (blockdraft.Binder), counting what it binds: the path a GPU device's
// drafter takes, with the CPU's arithmetic.
type binderDevice struct {
	engine.Device
	bound int
}

func (d *binderDevice) BindBlockDrafter(m *blockdraft.Model) (blockdraft.Runner, error) {
	d.bound++
	return keptModel{m}, nil
}

// keptModel computes with its Model and leaves it open on Close, as a
// device's Runner does.
type keptModel struct{ *blockdraft.Model }

func (keptModel) Close() error { return nil }

// TestDraftBlockDevice: the server's block drafter computes on the
// model's device when that device runs drafters, and on the CPU with
// DraftBlockOnCPU (muser serve --draft-block-device cpu).
func TestDraftBlockDevice(t *testing.T) {
	block := filepath.Join(t.TempDir(), "block.gguf")
	if err := blockdrafttest.WriteFor(block, modelPath, blockdrafttest.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	for _, onCPU := range []bool{false, true} {
		dev := &binderDevice{Device: cpu.New(cpu.Options{Threads: 2})}
		ts := startServer(t, func(o *Options) { o.Device, o.DraftBlockPath, o.DraftBlockOnCPU = dev, block, onCPU })
		if resp, b := ts.post(t, "/completion", `{"prompt":"Once upon a time","n_predict":8,"temperature":0}`); resp.StatusCode != http.StatusOK {
			t.Fatalf("DraftBlockOnCPU %v: status %d: %s", onCPU, resp.StatusCode, b)
		}
		if want := map[bool]int{false: 1, true: 0}[onCPU]; dev.bound != want {
			t.Errorf("DraftBlockOnCPU %v: the device bound %d drafters, want %d", onCPU, dev.bound, want)
		}
	}
}
