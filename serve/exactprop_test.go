package serve

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/blockdraft/blockdrafttest"
)

// stableBody strips what varies between two runs of the same request
// (ids, clock times, durations, cache counts) from a JSON answer, at any
// depth, keeping the tokens, text, probabilities and finish reasons.
func stableBody(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	var strip func(any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range []string{"timings", "id", "created", "created_at", "id_slot", "tokens_cached", "usage",
				"total_duration", "load_duration", "prompt_eval_duration", "eval_duration", "prompt_eval_count", "system_fingerprint", "cached_tokens", "seed"} {
				delete(x, k)
			}
			for _, y := range x {
				strip(y)
			}
		case []any:
			for _, y := range x {
				strip(y)
			}
		}
	}
	strip(v)
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestServeExactnessProperties sends a mix of requests (routes, lengths,
// greedy and seeded sampling, penalties, logit biases, several choices,
// JSON mode, logprobs) all at once to servers with several slots, a
// store, slot reuse and each draft lane, twice (the second time their
// prefixes come from the store or a slot), and requires every answer to be
// the one a plain server with one slot gives to the request alone.
func TestServeExactnessProperties(t *testing.T) {
	long := "Once upon a time, there was a little girl named Lily. She liked to play in the park with her friends. One day, she saw a big red ball under a tree. She ran to the ball and picked it up. Then a small dog came"
	reqs := []struct{ path, body string }{
		{"/completion", `{"prompt":"` + long + `","n_predict":30,"temperature":0,"n_probs":2,"cache_prompt":true}`},
		{"/completion", `{"prompt":"` + long + ` and","n_predict":25,"temperature":0.9,"seed":3,"top_k":10,"top_p":0.8,"min_p":0.05,"repeat_penalty":1.3,"repeat_last_n":16,"presence_penalty":0.2,"frequency_penalty":0.3,"n_probs":1}`},
		{"/completion", `{"prompt":"One day, a big dog saw a cat. The dog","n_predict":40,"temperature":1.2,"seed":11,"logit_bias":[[13,-100],[29,5]],"stop":["."]}`},
		{"/v1/completions", `{"prompt":"` + long + `","max_tokens":20,"temperature":0.8,"seed":5,"logprobs":2,"n":3}`},
		{"/v1/completions", `{"prompt":"Tom had a red ball. Tom had a red","max_tokens":24,"temperature":0,"frequency_penalty":1.0,"logprobs":1}`},
		{"/api/generate", `{"model":"stories260K","prompt":"` + long + `","stream":false,"raw":true,"options":{"num_predict":20,"temperature":0.7,"seed":9,"top_k":20,"repeat_penalty":1.1}}`},
		{"/api/generate", `{"model":"stories260K","prompt":"Lily and Tom","stream":false,"raw":true,"format":"json","options":{"num_predict":16,"temperature":0.5,"seed":2}}`},
		{"/completion", `{"prompt":"Lily","n_predict":600,"temperature":0.6,"seed":4,"ignore_eos":true}`},
	}
	plain := startServer(t, nil)
	want := make([]string, len(reqs))
	for i, r := range reqs {
		resp, b := plain.post(t, r.path, r.body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: status %d: %s", r.path, r.body, resp.StatusCode, b)
		}
		want[i] = stableBody(t, b)
	}
	block := filepath.Join(t.TempDir(), "block.gguf")
	if err := blockdrafttest.WriteFor(block, modelPath, blockdrafttest.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name string
		mod  func(*Options)
	}{
		{"parallel", func(o *Options) {}},
		{"lookup", func(o *Options) { o.DraftLookup = true }},
		{"lookup+model", func(o *Options) { o.DraftModelPath, o.DraftLookup, o.DraftMax = modelPath, true, 5 }},
		{"block", func(o *Options) { o.DraftBlockPath = block }},
	} {
		t.Run(v.name, func(t *testing.T) {
			ts := startServer(t, func(o *Options) {
				v.mod(o)
				o.Parallel, o.SlotReuse, o.DraftIgnoreCost = 3, true, true
			})
			for pass := range 2 {
				got := make([]string, len(reqs))
				var wg sync.WaitGroup
				for i, r := range reqs {
					wg.Go(func() {
						resp, b := ts.post(t, r.path, r.body)
						if resp.StatusCode != http.StatusOK {
							t.Errorf("%s %s: status %d: %s", r.path, r.body, resp.StatusCode, b)
							return
						}
						got[i] = stableBody(t, b)
					})
				}
				wg.Wait()
				for i := range reqs {
					if got[i] != want[i] {
						n := 0
						for n < min(len(got[i]), len(want[i])) && got[i][n] == want[i][n] {
							n++
						}
						t.Errorf("pass %d %s %.60s: answers differ from byte %d:\n got …%.300s\nwant …%.300s", pass, reqs[i].path, reqs[i].body, n, got[i][n:], want[i][n:])
					}
				}
			}
		})
	}
}
