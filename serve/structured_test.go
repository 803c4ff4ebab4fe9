package serve

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/grammar"
)

// personSchema bounds its strings so the small default model finishes.
const personSchema = `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":12},"age":{"type":"integer"},"pet":{"enum":["cat","dog","fish"]},"tags":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":3}},"required":["name","age","pet","tags"],"additionalProperties":false}`

func compileSchema(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkJSON fails unless text parses and validates against s (nil: any
// JSON object).
func checkJSON(t *testing.T, what, text string, s *jsonschema.Schema) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", what, text, err)
		return
	}
	if s == nil {
		if _, ok := v.(map[string]any); !ok {
			t.Errorf("%s: %q is not a JSON object", what, text)
		}
		return
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("%s: %q does not validate: %v", what, text, err)
	}
}

func startDefaultModel(t *testing.T, parallel int) *testServer {
	t.Helper()
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, func(o *Options) {
		o.ModelPath, o.Model, o.ModelName = "", f, defaultmodel.Name
		o.Parallel = parallel
	})
}

func userMsg(text string) []any { return []any{map[string]any{"role": "user", "content": text}} }

// TestStructuredOutput runs every structured-output form against the
// embedded default model and validates each answer with a JSON Schema
// library.
func TestStructuredOutput(t *testing.T) {
	ts := startDefaultModel(t, 2)
	person := compileSchema(t, personSchema)
	var schemaObj map[string]any
	if err := json.Unmarshal([]byte(personSchema), &schemaObj); err != nil {
		t.Fatal(err)
	}
	prompts := []string{"Tell me about a girl and her pet.", "What is 3 plus 4?", "Say hello."}
	for _, temp := range []float64{0, 0.9} {
		for i, p := range prompts {
			name := fmt.Sprintf("temperature %v prompt %d", temp, i)
			t.Run("chat json_schema "+name, func(t *testing.T) {
				r := ts.chat(t, map[string]any{"model": defaultmodel.Name, "temperature": temp, "seed": 7 + i, "max_tokens": 200,
					"messages": userMsg(p),
					"response_format": map[string]any{"type": "json_schema",
						"json_schema": map[string]any{"name": "person", "strict": true, "schema": schemaObj}}})
				if r.finish != "stop" {
					t.Fatalf("finish %q (content %q), want stop", r.finish, r.content)
				}
				checkJSON(t, "content", r.content, person)
			})
			t.Run("chat json_object "+name, func(t *testing.T) {
				r := ts.chat(t, map[string]any{"model": defaultmodel.Name, "temperature": temp, "seed": 7 + i, "max_tokens": 200,
					"messages": userMsg(p), "response_format": map[string]any{"type": "json_object"}})
				if r.finish == "stop" {
					checkJSON(t, "content", r.content, nil)
				} else if !strings.HasPrefix(r.content, "{") {
					t.Errorf("finish %q with content %q, want a JSON object's start", r.finish, r.content)
				}
			})
		}
	}
	t.Run("chat stream json_schema", func(t *testing.T) {
		r := ts.streamChat(t, map[string]any{"model": defaultmodel.Name, "temperature": 0.7, "seed": 3, "max_tokens": 200,
			"messages":        userMsg("Tell me a story."),
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "p", "strict": true, "schema": schemaObj}}})
		checkJSON(t, "streamed content", r.content, person)
	})
	t.Run("completions json_schema", func(t *testing.T) {
		var out struct {
			Choices []struct {
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		ts.postJSON(t, "/v1/completions", map[string]any{"model": defaultmodel.Name, "prompt": "Once upon a time", "max_tokens": 200, "temperature": 0,
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "p", "schema": schemaObj}}}, &out)
		if out.Choices[0].FinishReason != "stop" {
			t.Fatalf("finish %q (%q), want stop", out.Choices[0].FinishReason, out.Choices[0].Text)
		}
		checkJSON(t, "text", out.Choices[0].Text, person)
	})
	t.Run("llama grammar", func(t *testing.T) {
		var out struct {
			Content  string `json:"content"`
			StopType string `json:"stop_type"`
		}
		ts.postJSON(t, "/completion", map[string]any{"prompt": "The cat", "n_predict": 40, "temperature": 0.9, "seed": 1,
			"grammar": "root ::= (\"yes\" | \"no\") \", \" [a-z]{2,5} \".\""}, &out)
		ok := false
		for _, w := range []string{"yes, ", "no, "} {
			if rest, found := strings.CutPrefix(out.Content, w); found && strings.HasSuffix(rest, ".") && len(rest) >= 3 && len(rest) <= 6 &&
				strings.Trim(rest[:len(rest)-1], "abcdefghijklmnopqrstuvwxyz") == "" {
				ok = true
			}
		}
		if !ok {
			t.Errorf("content %q is not in the grammar's language", out.Content)
		}
	})
	t.Run("llama json_schema", func(t *testing.T) {
		var out struct {
			Content string `json:"content"`
		}
		ts.postJSON(t, "/completion", map[string]any{"prompt": "The dog", "n_predict": 200, "temperature": 0, "json_schema": schemaObj}, &out)
		checkJSON(t, "content", out.Content, person)
	})
	t.Run("ollama chat format schema", func(t *testing.T) {
		var out struct {
			Message    struct{ Content string } `json:"message"`
			DoneReason string                   `json:"done_reason"`
		}
		ts.postJSON(t, "/api/chat", map[string]any{"model": defaultmodel.Name, "stream": false, "messages": userMsg("Who are you?"),
			"format": schemaObj, "options": map[string]any{"seed": 5, "num_predict": 200}}, &out)
		if out.DoneReason != "stop" {
			t.Fatalf("done_reason %q (%q), want stop", out.DoneReason, out.Message.Content)
		}
		checkJSON(t, "message.content", out.Message.Content, person)
	})
	t.Run("ollama generate format json", func(t *testing.T) {
		var out struct {
			Response   string `json:"response"`
			DoneReason string `json:"done_reason"`
		}
		ts.postJSON(t, "/api/generate", map[string]any{"model": defaultmodel.Name, "stream": false, "prompt": "Tell me about cats.",
			"format": "json", "options": map[string]any{"temperature": 0, "num_predict": 300}}, &out)
		if out.DoneReason == "stop" {
			checkJSON(t, "response", out.Response, nil)
		} else if !strings.HasPrefix(out.Response, "{") {
			t.Errorf("done_reason %q with response %q, want a JSON object's start", out.DoneReason, out.Response)
		}
	})
}

// TestStructuredDeterminism checks that seeded constrained sampling gives
// the same answers alone and batched.
func TestStructuredDeterminism(t *testing.T) {
	ts := startDefaultModel(t, 4)
	var schemaObj map[string]any
	if err := json.Unmarshal([]byte(personSchema), &schemaObj); err != nil {
		t.Fatal(err)
	}
	body := func(i int) map[string]any {
		return map[string]any{"model": defaultmodel.Name, "temperature": 1.0, "seed": 100 + i, "max_tokens": 120,
			"messages":        userMsg([]string{"Tell me about a boy.", "What colour is the sky?", "Count to three.", "Hi!"}[i]),
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "p", "strict": true, "schema": schemaObj}}}
	}
	const n = 4
	alone := make([]chatResult, n)
	for i := range n {
		alone[i] = ts.chat(t, body(i))
	}
	batched := make([]chatResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { batched[i] = ts.chat(t, body(i)) })
	}
	wg.Wait()
	distinct := map[string]bool{}
	for i := range n {
		if alone[i].content != batched[i].content {
			t.Errorf("request %d: alone %q, batched %q", i, alone[i].content, batched[i].content)
		}
		distinct[alone[i].content] = true
	}
	if len(distinct) < 2 {
		t.Errorf("all %d seeded answers are the same (%q): the seeds had no effect", n, alone[0].content)
	}
}

// TestGrammarCache checks a server's cache of compiled grammars: a hit
// returns the same compiled grammar, the oldest entry goes past
// maxCompiled, and each server has its own.
func TestGrammarCache(t *testing.T) {
	ts := startDefaultModel(t, 1)
	s := ts.s
	compile := func(i int) *grammar.Compiled {
		t.Helper()
		g, err := grammar.Parse(fmt.Sprintf("root ::= \"x%d\"", i))
		if err != nil {
			t.Fatal(err)
		}
		c, e := s.compileGrammar(g, "grammar")
		if e != nil {
			t.Fatal(e)
		}
		return c
	}
	first := compile(0)
	if again := compile(0); again != first {
		t.Error("the same grammar compiled twice, want the cached one")
	}
	for i := 1; i <= maxCompiled; i++ {
		compile(i)
	}
	if n := len(s.grammars.m); n != maxCompiled {
		t.Errorf("cache holds %d grammars, want %d", n, maxCompiled)
	}
	if again := compile(0); again == first {
		t.Error("the oldest grammar is still cached past maxCompiled, want it evicted")
	}
	other := startDefaultModel(t, 1).s
	if len(other.grammars.m) != 0 {
		t.Errorf("a new server's cache holds %d grammars, want none", len(other.grammars.m))
	}
}
