package serve

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/muserhq/muser/serve/sched"
	"github.com/muserhq/muser/serve/strictjson"
)

var (
	fuzzOnce sync.Once
	fuzzSrv  *Server
	fuzzErr  error
)

// FuzzRequests feeds bodies to every generation route's decoding and
// validation (everything before a request is queued): nothing may panic,
// and a body is either refused with a 4xx or yields a prompt that fits
// the vocabulary.
func FuzzRequests(f *testing.F) {
	needModel(f)
	for _, s := range []string{
		`{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"logprobs":true,"top_logprobs":2}`,
		`{"messages":[{"role":"system","content":[{"type":"text","text":"x"}]},{"role":"user","content":"y"}],"stop":["a","b"],"logit_bias":{"5":-100}}`,
		`{"prompt":"Once upon a time","max_tokens":4,"logprobs":1,"stop":"x"}`,
		`{"prompt":[1,403,407],"n":1,"echo":false}`,
		`{"prompt":["Once ",403,"time"],"n_predict":3,"logit_bias":[[1,false],[2,0.5]],"cache_prompt":false}`,
		`{"model":"stories260K:latest","prompt":"hi","system":"s","context":[1,2],"options":{"num_predict":3,"stop":["."]}}`,
		`{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"tools":[],"options":{"temperature":0.1}}`,
		`{"messages":[{"role":"tool","content":"x"}],"n":2,"tools":[{}]}`, `{"prompt":[[1,2],[3]]}`, `{`, `[]`, `null`,
		`{"model":"stories260K","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"2"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}],"tool_choice":"required","n":2}`,
		`{"model":"stories260K","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"1"}],"instructions":"be brief","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"f"},"max_output_tokens":4}`,
	} {
		f.Add(s)
	}
	fuzzOnce.Do(func() {
		fuzzSrv, fuzzErr = New(Options{ModelPath: modelPath, Home: f.TempDir(), StoreNoSync: true, Ctx: 256, Threads: 1,
			Logger: slog.New(slog.DiscardHandler)})
	})
	if fuzzErr != nil {
		f.Fatal(fuzzErr)
	}
	s := fuzzSrv
	vocab := s.model.tok.VocabSize()
	check := func(t *testing.T, route string, g *genReq, e *apiError) {
		if e != nil {
			if e.Status < 400 || e.Status >= 500 || e.Message == "" {
				t.Fatalf("%s: refused with %d %q", route, e.Status, e.Message)
			}
			return
		}
		for _, id := range g.prompt {
			if id < 0 || int(id) >= vocab {
				t.Fatalf("%s: prompt token %d outside the vocabulary", route, id)
			}
		}
		if err := s.sched.Check(&sched.Request{Prompt: g.prompt, Sampling: g.sampling}); err != nil && len(g.prompt) < s.sched.Ctx() && len(g.prompt) > 0 {
			t.Fatalf("%s: accepted by the route, refused by the scheduler: %v", route, err)
		}
	}
	f.Fuzz(func(t *testing.T, body string) {
		{
			var q chatRequest
			if strictjson.Decode([]byte(body), &q) == nil {
				e := s.chatGen(&q)
				var g *genReq
				if e == nil {
					g, e = s.chatGenReq(&q)
				}
				check(t, "chat", g, e)
			}
		}
		{
			var q completionRequest
			if strictjson.Decode([]byte(body), &q) == nil {
				e := q.check()
				g := &genReq{}
				if e == nil {
					g.sampling, e = q.params(vocab)
				}
				if e == nil {
					g.prompt, e = s.parsePrompt(q.Prompt, "prompt", false, true)
				}
				check(t, "completions", g, e)
			}
		}
		{
			var q llamaRequest
			if strictjson.Decode([]byte(body), &q) == nil {
				e := q.unsupported()
				g := &genReq{}
				if e == nil {
					g.sampling, e = q.params(vocab, s.model.tok.EOGs())
				}
				if e == nil {
					g.prompt, e = s.parsePrompt(q.Prompt, "prompt", true, true)
				}
				check(t, "completion", g, e)
			}
		}
		{
			var q responsesRequest
			if strictjson.Decode([]byte(body), &q) == nil {
				g, _, e := s.responsesGen("fuzz", &q)
				if e != nil && e.Code == "previous_response_not_found" {
					e = nil // a 404 for an id the store lacks
					g = &genReq{prompt: []int32{1}}
				}
				check(t, "responses", g, e)
			}
		}
		{
			var q ollamaChatRequest
			if strictjson.Decode([]byte(body), &q) == nil {
				g, e := s.ollamaGen(&q.ollamaCommon, "messages")
				if e == nil {
					g.prompt = []int32{1}
				}
				check(t, "api/chat", g, e)
			}
		}
	})
}
