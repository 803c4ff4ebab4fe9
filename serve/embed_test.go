package serve

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/kvcache"
	"github.com/muserhq/muser/infer/tokenizer"
)

// wantEmbedding computes text's embedding outside the server: its tokens
// (with BOS) in one Forward, pooled, normalized when asked.
func wantEmbedding(t *testing.T, s *Server, text string, p engine.Pooling, normalize bool) ([]float32, int) {
	t.Helper()
	ids, err := s.model.tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
	if err != nil {
		t.Fatal(err)
	}
	return wantEmbeddingIDs(t, s, ids, p, normalize), len(ids)
}

func wantEmbeddingIDs(t *testing.T, s *Server, ids []int32, p engine.Pooling, normalize bool) []float32 {
	t.Helper()
	m := s.model.eng
	seq, err := m.NewSequence(len(ids) + 1)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	st := []engine.Step{{Seq: seq, Tokens: ids, Hidden: engine.OutputAll}}
	if err := m.Forward(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	v, err := engine.Pool(p, st[0].HiddenStates, m.Config().Hidden)
	if err != nil {
		t.Fatal(err)
	}
	if normalize {
		engine.Normalize(v)
	}
	return v
}

func requireVec(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d dimensions, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestEmbeddingsRoutes(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.Pooling = "mean"; o.Parallel = 2 })
	texts := []string{"Once upon a time, there was a little dog.", "The cat sat on the mat", "Lily liked to play in the park with her friends."}
	want := make([][]float32, len(texts))
	raw := make([][]float32, len(texts))
	ntok := make([]int, len(texts))
	for i, x := range texts {
		want[i], ntok[i] = wantEmbedding(t, ts.s, x, engine.PoolingMean, true)
		raw[i], _ = wantEmbedding(t, ts.s, x, engine.PoolingMean, false)
	}
	if n := norm(want[0]); math.Abs(n-1) > 1e-6 {
		t.Fatalf("normalized embedding has length %v, want 1", n)
	}

	type oaiResp struct {
		Object string `json:"object"`
		Model  string `json:"model"`
		Data   []struct {
			Object    string          `json:"object"`
			Index     int             `json:"index"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}
	t.Run("openai string", func(t *testing.T) {
		var r oaiResp
		ts.postJSON(t, "/v1/embeddings", map[string]any{"input": texts[0], "model": ts.s.ModelID()}, &r)
		var v []float32
		if err := json.Unmarshal(r.Data[0].Embedding, &v); err != nil {
			t.Fatal(err)
		}
		requireVec(t, "embedding", v, want[0])
		if r.Object != "list" || r.Data[0].Object != "embedding" || r.Model != ts.s.ModelID() {
			t.Errorf("got object %q, data object %q, model %q; want list, embedding, %q", r.Object, r.Data[0].Object, r.Model, ts.s.ModelID())
		}
		if r.Usage.PromptTokens != ntok[0] || r.Usage.TotalTokens != ntok[0] {
			t.Errorf("usage: got %d prompt, %d total tokens; want %d", r.Usage.PromptTokens, r.Usage.TotalTokens, ntok[0])
		}
	})
	t.Run("openai array and base64", func(t *testing.T) {
		var r oaiResp
		ts.postJSON(t, "/v1/embeddings", map[string]any{"input": texts, "encoding_format": "base64"}, &r)
		if len(r.Data) != len(texts) {
			t.Fatalf("got %d embeddings, want %d", len(r.Data), len(texts))
		}
		total := 0
		for i, d := range r.Data {
			var s string
			if err := json.Unmarshal(d.Embedding, &s); err != nil {
				t.Fatalf("data[%d]: %v", i, err)
			}
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				t.Fatal(err)
			}
			v := make([]float32, len(b)/4)
			for j := range v {
				v[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
			}
			if d.Index != i {
				t.Errorf("data[%d].index = %d", i, d.Index)
			}
			requireVec(t, fmt.Sprintf("data[%d]", i), v, want[i])
			total += ntok[i]
		}
		if r.Usage.PromptTokens != total {
			t.Errorf("usage.prompt_tokens: got %d, want %d", r.Usage.PromptTokens, total)
		}
	})
	t.Run("openai token ids", func(t *testing.T) {
		ids, _ := ts.s.model.tok.Encode(texts[1], tokenizer.EncodeOptions{AddSpecial: true})
		for _, input := range []any{ids, [][]int32{ids, ids}} {
			var r oaiResp
			ts.postJSON(t, "/v1/embeddings", map[string]any{"input": input}, &r)
			for i, d := range r.Data {
				var v []float32
				json.Unmarshal(d.Embedding, &v)
				requireVec(t, fmt.Sprintf("data[%d]", i), v, want[1])
			}
		}
	})
	t.Run("llama.cpp", func(t *testing.T) {
		for _, path := range []string{"/embedding", "/embeddings"} {
			var r []struct {
				Index     int         `json:"index"`
				Embedding [][]float32 `json:"embedding"`
			}
			ts.postJSON(t, path, map[string]any{"content": texts[2]}, &r)
			if len(r) != 1 || len(r[0].Embedding) != 1 {
				t.Fatalf("%s: got %d results, want one with one vector", path, len(r))
			}
			requireVec(t, path, r[0].Embedding[0], want[2])
			ts.postJSON(t, path, map[string]any{"input": texts[2], "embd_normalize": -1}, &r)
			requireVec(t, path+" embd_normalize -1", r[0].Embedding[0], raw[2])
		}
	})
	t.Run("ollama", func(t *testing.T) {
		var r struct {
			Model      string      `json:"model"`
			Embeddings [][]float32 `json:"embeddings"`
			Count      int         `json:"prompt_eval_count"`
		}
		ts.postJSON(t, "/api/embed", map[string]any{"model": ts.s.ModelID(), "input": texts[:2]}, &r)
		if len(r.Embeddings) != 2 || r.Count != ntok[0]+ntok[1] {
			t.Fatalf("got %d embeddings, %d tokens; want 2, %d", len(r.Embeddings), r.Count, ntok[0]+ntok[1])
		}
		requireVec(t, "embeddings[0]", r.Embeddings[0], want[0])
		requireVec(t, "embeddings[1]", r.Embeddings[1], want[1])
		var legacy struct {
			Embedding []float32 `json:"embedding"`
		}
		ts.postJSON(t, "/api/embeddings", map[string]any{"model": ts.s.ModelID(), "prompt": texts[0]}, &legacy)
		requireVec(t, "legacy embedding (not normalized)", legacy.Embedding, raw[0])
	})
	t.Run("truncate", func(t *testing.T) {
		long := strings.Repeat("the dog ran to the park and ", 120) // far beyond the 512-token context
		var r struct {
			Count int `json:"prompt_eval_count"`
		}
		ts.postJSON(t, "/api/embed", map[string]any{"input": long}, &r)
		if r.Count != 511 {
			t.Errorf("truncated input: got %d tokens, want 511", r.Count)
		}
		resp, body := ts.post(t, "/api/embed", fmt.Sprintf(`{"input": %q, "truncate": false}`, long))
		if resp.StatusCode != 400 || !strings.Contains(string(body), "context") {
			t.Errorf("truncate false: got %d %s, want 400 naming the context", resp.StatusCode, body)
		}
	})
}

func TestEmbeddingsBadInput(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.Pooling = "last" })
	long := "[" + strings.TrimSuffix(strings.Repeat("5,", 600), ",") + "]"
	tests := []struct {
		path, body string
		param      string // the field the error names
	}{
		{"/v1/embeddings", `{}`, "input"},
		{"/v1/embeddings", `{"input": ""}`, "input"},
		{"/v1/embeddings", `{"input": []}`, "input"},
		{"/v1/embeddings", `{"input": [[]]}`, "input[0]"},
		{"/v1/embeddings", `{"input": ["a", 3]}`, "input[1]"},
		{"/v1/embeddings", `{"input": [1, "a"]}`, "input"},
		{"/v1/embeddings", `{"input": [99999]}`, "input[0]"},
		{"/v1/embeddings", `{"input": [null]}`, "input[0]"},
		{"/v1/embeddings", `{"input": [1, null]}`, "input[1]"},
		{"/v1/embeddings", `{"input": [[1, null]]}`, "input[0]"},
		{"/v1/embeddings", `{"input": [1.5]}`, "input"},
		{"/v1/embeddings", `{"input": {"a": 1}}`, "input"},
		{"/v1/embeddings", `{"input": "x", "dimensions": 7}`, "dimensions"},
		{"/v1/embeddings", `{"input": "x", "encoding_format": "hex"}`, "encoding_format"},
		{"/v1/embeddings", `{"input": "x", "pooling": "mean"}`, "pooling"},
		{"/v1/embeddings", `{"input": ` + long + `}`, "input"},
		{"/embedding", `{"content": "x", "embd_normalize": 1}`, "embd_normalize"},
		{"/embedding", `{"content": "x", "input": "y"}`, "input"},
		{"/embedding", `{}`, "content"},
		{"/api/embed", `{"input": ` + long + `, "truncate": false}`, "input"},
		{"/api/embed", `{"input": "x", "dimensions": 3}`, "dimensions"},
		{"/api/embeddings", `{"model": "muser"}`, "prompt"},
		{"/api/embeddings", `{"prompt": ""}`, "prompt"},
	}
	for _, tc := range tests {
		t.Run(tc.path+" "+tc.body[:min(len(tc.body), 40)], func(t *testing.T) {
			resp, body := ts.post(t, tc.path, tc.body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("got %d %s, want 400", resp.StatusCode, body)
			}
			if !strings.Contains(string(body), tc.param) {
				t.Fatalf("got %s, want the error to name %q", body, tc.param)
			}
		})
	}
	resp, body := ts.post(t, "/v1/embeddings", `{"input": "x", "model": "gpt-4"}`)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown model: got %d %s, want 404", resp.StatusCode, body)
	}
}

func TestEmbeddingsWithoutPooling(t *testing.T) {
	ts := startServer(t, nil) // stories260K declares no pooling
	if p := ts.s.Pooling(); p != engine.PoolingNone {
		t.Fatalf("pooling: got %v, want none", p)
	}
	for _, c := range []struct{ path, body, param string }{
		{"/v1/embeddings", `{"input": "hello"}`, "input"},
		{"/api/embed", `{"input": "hello"}`, "input"},
		{"/api/embeddings", `{"prompt": "hello"}`, "prompt"},
	} {
		resp, body := ts.post(t, c.path, c.body)
		if resp.StatusCode != 400 || !strings.Contains(string(body), "--pooling") || !strings.Contains(string(body), c.param) {
			t.Errorf("%s: got %d %s, want 400 naming %s and --pooling", c.path, resp.StatusCode, body, c.param)
		}
	}
	// llama.cpp's /embedding answers every token's state, unnormalized.
	text := "Once upon a time"
	ids, _ := ts.s.model.tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
	var r []struct {
		Embedding [][]float32 `json:"embedding"`
	}
	ts.postJSON(t, "/embedding", map[string]any{"content": text}, &r)
	if len(r) != 1 || len(r[0].Embedding) != len(ids) {
		t.Fatalf("got %d vectors, want one per token (%d)", len(r[0].Embedding), len(ids))
	}
	requireVec(t, "last token", r[0].Embedding[len(ids)-1], wantEmbeddingIDs(t, ts.s, ids, engine.PoolingLast, false))
	requireVec(t, "first token", r[0].Embedding[0], wantEmbeddingIDs(t, ts.s, ids, engine.PoolingCLS, false))
}

func TestEmbeddingsDefaultModel(t *testing.T) {
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(o *Options) {
		o.ModelPath, o.Model, o.ModelName, o.FallbackPooling = "", f, defaultmodel.Name, defaultmodel.Pooling
	})
	if p := ts.s.Pooling(); p.String() != defaultmodel.Pooling {
		t.Fatalf("pooling: got %v, want %s", p, defaultmodel.Pooling)
	}
	var r struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	ts.postJSON(t, "/v1/embeddings", map[string]any{"input": "What is the capital of France?", "model": defaultmodel.Name}, &r)
	want, _ := wantEmbedding(t, ts.s, "What is the capital of France?", engine.PoolingMean, true)
	requireVec(t, "default model embedding", r.Data[0].Embedding, want)
	// --pooling overrides the fallback.
	ts2 := startServer(t, func(o *Options) {
		o.ModelPath, o.Model, o.FallbackPooling, o.Pooling = "", f, defaultmodel.Pooling, "cls"
	})
	if ts2.s.Pooling() != engine.PoolingCLS {
		t.Fatalf("--pooling cls: got %v", ts2.s.Pooling())
	}
}

func TestPoolingOption(t *testing.T) {
	needModel(t)
	_, err := New(Options{ModelPath: modelPath, Home: t.TempDir(), StoreNoSync: true, Pooling: "avg"})
	var oe *OptionError
	if !errors.As(err, &oe) || oe.Option != "--pooling" {
		t.Fatalf("got %v, want an *OptionError naming --pooling", err)
	}
}

// plainDevice binds backends that hide engine.HiddenBackend, as a device
// that returns no hidden states does.
type plainDevice struct{ engine.Device }

func (d plainDevice) Bind(w *engine.Weights, kv kvcache.DType) (engine.Backend, error) {
	be, err := d.Device.Bind(w, kv)
	return struct{ engine.Backend }{be}, err
}

func TestEmbeddingsDeviceWithoutHiddenStates(t *testing.T) {
	ts := startServer(t, func(o *Options) {
		o.Pooling = "mean"
		o.Device = plainDevice{cpu.New(cpu.Options{Threads: 1})}
	})
	for _, c := range []struct{ path, body string }{
		{"/v1/embeddings", `{"input": "hello"}`},
		{"/embedding", `{"content": "hello"}`},
		{"/api/embed", `{"input": "hello"}`},
	} {
		resp, body := ts.post(t, c.path, c.body)
		if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), "device cpu") {
			t.Errorf("%s: got %d %s, want 501 naming the device", c.path, resp.StatusCode, body)
		}
	}
	// Generation still works on that device.
	var r map[string]any
	ts.postJSON(t, "/completion", map[string]any{"prompt": "Once", "n_predict": 2}, &r)
}
