package serve

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/infertest"
)

const (
	keyAlice = "sk-alice-0123456789abcdef"
	keyBob   = "sk-bob-0123456789abcdefgh"
)

// TestBadInput sends malformed, unknown, mistyped, oversize, unsupported
// and unauthenticated requests: each gets a clear 4xx in its route
// family's error shape, and the server keeps serving.
func TestBadInput(t *testing.T) {
	ts := startServer(t, func(o *Options) {
		o.APIKeysFile = writeKeys(t, keyAlice+" alice", keyBob+" bob")
		o.MaxBodyBytes = 4096
		o.Ctx = 128
	})
	auth := []string{"Authorization", "Bearer " + keyAlice}
	chat := func(extra string) string {
		return `{"model":"stories260K","messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	long := infertest.Story(0, 300) // more tokens than the 128-token context
	for _, tc := range []struct {
		name, method, path, body string
		header                   []string
		status                   int
		code, param, msg         string // expected error code (OpenAI/llama), param (OpenAI), message part
	}{
		{"malformed JSON", "POST", "/v1/chat/completions", `{"model":`, auth, 400, "invalid_json", "", "malformed JSON"},
		{"not JSON", "POST", "/v1/chat/completions", `hello`, auth, 400, "invalid_json", "", "malformed JSON at byte 1"},
		{"empty body", "POST", "/v1/chat/completions", ``, auth, 400, "invalid_json", "", "the body is empty"},
		{"trailing data", "POST", "/v1/chat/completions", chat("") + `{}`, auth, 400, "invalid_json", "", "unexpected data after the JSON value"},
		{"unknown field", "POST", "/v1/chat/completions", chat(`,"temprature":1`), auth, 400, "unknown_field", "temprature", `unknown field "temprature"`},
		{"unknown nested field", "POST", "/v1/chat/completions",
			`{"model":"stories260K","messages":[{"role":"user","contnet":"hi"}]}`, auth, 400, "unknown_field", "messages[0].contnet", `unknown field "messages[0].contnet"`},
		{"unknown field in part", "POST", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":[{"type":"text","txt":"hi"}]}]}`, auth, 400, "unknown_field", "messages[0].content[0].txt", "txt"},
		{"case matters", "POST", "/v1/chat/completions", chat(`,"Temperature":1`), auth, 400, "unknown_field", "Temperature", "Temperature"},
		{"duplicate field", "POST", "/v1/chat/completions", chat(`,"seed":1,"seed":2`), auth, 400, "duplicate_field", "seed", "appears twice"},
		{"wrong type", "POST", "/v1/chat/completions", chat(`,"max_tokens":"10"`), auth, 400, "invalid_type", "max_tokens", "got a string, want an integer"},
		{"wrong type nested", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":7}]}`, auth, 400, "invalid_type", "messages[0].content", "want a string or an array of content parts"},
		{"float for int", "POST", "/v1/completions", `{"prompt":"x","max_tokens":1.5}`, auth, 400, "invalid_type", "max_tokens", "want an integer"},
		{"out of range", "POST", "/v1/chat/completions", chat(`,"temperature":3`), auth, 400, "invalid_value", "temperature", "temperature is 3; want 0 to 2"},
		{"bad logit bias", "POST", "/v1/chat/completions", chat(`,"logit_bias":{"abc":1}`), auth, 400, "invalid_value", `logit_bias["abc"]`, "not a token id"},
		{"no messages", "POST", "/v1/chat/completions", `{"messages":[]}`, auth, 400, "invalid_value", "messages", "messages is empty"},
		{"bad role", "POST", "/v1/chat/completions", `{"messages":[{"role":"robot","content":"x"}]}`, auth, 400, "invalid_value", "messages[0].role", "robot"},
		{"tool without a name", "POST", "/v1/chat/completions", chat(`,"tools":[{"type":"function","function":{"description":"f"}}]`), auth, 400, "invalid_value", "tools[0].function.name", "every tool needs a name"},
		{"n too large", "POST", "/v1/chat/completions", chat(`,"n":17`), auth, 400, "invalid_value", "n", "n is 17"},
		{"json schema without a name", "POST", "/v1/chat/completions", chat(`,"response_format":{"type":"json_schema","json_schema":{}}`), auth, 400, "invalid_value", "response_format.json_schema.name", "json_schema.name"},
		{"invalid json schema", "POST", "/v1/chat/completions", chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"float"}}}`), auth, 400, "invalid_value", "response_format.json_schema.schema", "unknown type \"float\""},
		{"strict json schema keyword", "POST", "/v1/chat/completions", chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"string","pattern":"a+"}}}`), auth, 400, "invalid_value", "response_format.json_schema.schema", "pattern"},
		{"response format type", "POST", "/v1/chat/completions", chat(`,"response_format":{"type":"yaml"}`), auth, 400, "invalid_value", "response_format.type", "yaml"},
		{"completions json schema", "POST", "/v1/completions", `{"model":"stories260K","prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"$ref":"#/$defs/nope"}}}}`, auth, 400, "invalid_value", "response_format.json_schema.schema", "does not resolve"},
		{"image part", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, auth, 400, "unsupported_field", "messages[0].content[0].type", "image_url"},
		{"tool message without id", "POST", "/v1/chat/completions", `{"messages":[{"role":"tool","content":"x"}]}`, auth, 400, "invalid_value", "messages[0].tool_call_id", "tool_call_id is missing"},
		{"echo", "POST", "/v1/completions", `{"prompt":"x","echo":true}`, auth, 400, "unsupported_field", "echo", "echo"},
		{"several prompts", "POST", "/v1/completions", `{"prompt":["a","b"]}`, auth, 400, "unsupported_field", "prompt", "one prompt per request"},
		{"prompt too long", "POST", "/v1/completions", fmt.Sprintf(`{"prompt":%q}`, long), auth, 400, "context_length_exceeded", "prompt", "but the context holds 128 tokens"},
		{"chat too long", "POST", "/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, long), auth, 400, "context_length_exceeded", "messages", "the context holds 128 tokens"},
		{"token outside vocab", "POST", "/v1/completions", `{"prompt":[1,2,99999]}`, auth, 400, "invalid_value", "prompt[2]", "outside the vocabulary"},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"gpt-4","messages":[{"role":"user","content":"x"}]}`, auth, 404, "model_not_found", "model", `"gpt-4" does not exist`},
		{"stream options without stream", "POST", "/v1/chat/completions", chat(`,"stream_options":{"include_usage":true}`), auth, 400, "invalid_value", "stream_options", "only allowed with stream"},
		{"oversize body", "POST", "/v1/chat/completions", chat(`,"user":"` + strings.Repeat("x", 5000) + `"`), auth, 413, "body_too_large", "", "larger than 4096 bytes"},
		{"no key", "POST", "/v1/chat/completions", chat(""), nil, 401, "invalid_api_key", "", "missing API key"},
		{"wrong key", "POST", "/v1/chat/completions", chat(""), []string{"Authorization", "Bearer sk-wrong-0123456789abcdef"}, 401, "invalid_api_key", "", "invalid API key"},
		{"not bearer", "GET", "/v1/models", "", []string{"Authorization", "Basic " + keyAlice}, 401, "invalid_api_key", "", "missing API key"},
		{"unknown model path", "GET", "/v1/models/gpt-4", "", auth, 404, "model_not_found", "model", "gpt-4"},
		{"wrong method", "GET", "/v1/chat/completions", "", auth, 405, "method_not_allowed", "", "takes POST"},
		{"no route", "GET", "/v1/nothing", "", auth, 404, "not_found", "", "no route"},
		// llama.cpp's shape: {"error":{"code":N,...}}; code here means the HTTP status.
		{"llama unknown field", "POST", "/completion", `{"prompt":"x","n_predcit":5}`, auth, 400, "400", "", `unknown field "n_predcit"`},
		{"llama wrong type", "POST", "/completion", `{"prompt":"x","n_predict":"5"}`, auth, 400, "400", "", `field "n_predict": got a string, want an integer`},
		{"llama grammar", "POST", "/completion", `{"prompt":"x","grammar":"root ::= x"}`, auth, 400, "400", "", `rule "x" is referenced but not defined`},
		{"llama grammar syntax", "POST", "/completion", `{"prompt":"x","grammar":"root ::= [a-"}`, auth, 400, "400", "", "grammar: grammar syntax error at line 1"},
		{"llama json_schema", "POST", "/completion", `{"prompt":"x","json_schema":{"type":7}}`, auth, 400, "400", "", "json_schema: invalid JSON schema at /type"},
		{"llama grammar and json_schema", "POST", "/completion", `{"prompt":"x","grammar":"root ::= \"a\"","json_schema":{}}`, auth, 400, "400", "", "both set"},
		{"llama bad bias", "POST", "/completion", `{"prompt":"x","logit_bias":[[1]]}`, auth, 400, "400", "", "element 0: want [token id, bias]"},
		{"llama no key", "POST", "/tokenize", `{"content":"x"}`, nil, 401, "401", "", "missing API key"},
		{"llama bad tokens", "POST", "/detokenize", `{"tokens":[-1]}`, auth, 400, "400", "", "outside the vocabulary"},
		// Ollama's shape: {"error":"..."}.
		{"ollama unknown option", "POST", "/api/generate", `{"model":"stories260K","prompt":"x","options":{"temprature":1}}`, auth, 400, "", "", `unknown field "options.temprature"`},
		{"ollama format", "POST", "/api/chat", `{"model":"stories260K","messages":[{"role":"user","content":"x"}],"format":"yaml"}`, auth, 400, "", "", `format is "yaml"`},
		{"ollama format schema", "POST", "/api/generate", `{"model":"stories260K","prompt":"x","format":{"type":"object","properties":{"a":{"$ref":"#/x"}}}}`, auth, 400, "", "", "format: invalid JSON schema at /properties/a/$ref"},
		{"ollama images", "POST", "/api/chat", `{"model":"stories260K","messages":[{"role":"user","content":"x","images":["aGk="]}]}`, auth, 400, "", "", "messages[0].images"},
		{"ollama no model", "POST", "/api/generate", `{"prompt":"x"}`, auth, 400, "", "", "model is required"},
		{"ollama unknown model", "POST", "/api/show", `{"model":"llama3"}`, auth, 404, "", "", "model 'llama3' not found"},
		{"ollama num_ctx", "POST", "/api/generate", `{"model":"stories260K","prompt":"x","options":{"num_ctx":4096}}`, auth, 400, "", "", "options.num_ctx is 4096"},
		{"ollama no key", "GET", "/api/tags", "", nil, 401, "", "", "missing API key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := ts.do(t, tc.method, tc.path, tc.body, tc.header...)
			if resp.StatusCode != tc.status {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tc.status)
			}
			id := resp.Header.Get("X-Request-Id")
			if id == "" {
				t.Error("no X-Request-Id header")
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", ct)
			}
			var msg, code, param, rid string
			switch familyOf(tc.path) {
			case famOllama:
				var e struct {
					Error     string `json:"error"`
					RequestID string `json:"request_id"`
				}
				if err := json.Unmarshal(body, &e); err != nil {
					t.Fatalf("%v in %s", err, body)
				}
				msg, rid = e.Error, e.RequestID
			case famOpenAI:
				var e struct {
					Error struct {
						Message   string  `json:"message"`
						Type      string  `json:"type"`
						Param     *string `json:"param"`
						Code      *string `json:"code"`
						RequestID string  `json:"request_id"`
					} `json:"error"`
				}
				if err := json.Unmarshal(body, &e); err != nil {
					t.Fatalf("%v in %s", err, body)
				}
				msg, rid = e.Error.Message, e.Error.RequestID
				if e.Error.Type == "" {
					t.Errorf("no error type in %s", body)
				}
				if e.Error.Code != nil {
					code = *e.Error.Code
				}
				if e.Error.Param != nil {
					param = *e.Error.Param
				}
			default:
				var e struct {
					Error struct {
						Code      int    `json:"code"`
						Message   string `json:"message"`
						Type      string `json:"type"`
						RequestID string `json:"request_id"`
					} `json:"error"`
				}
				if err := json.Unmarshal(body, &e); err != nil {
					t.Fatalf("%v in %s", err, body)
				}
				msg, rid, code = e.Error.Message, e.Error.RequestID, fmt.Sprint(e.Error.Code)
			}
			if code != tc.code || param != tc.param {
				t.Errorf("got code %q param %q, want %q %q (%s)", code, param, tc.code, tc.param, body)
			}
			if !strings.Contains(msg, tc.msg) {
				t.Errorf("got message %q, want it to contain %q", msg, tc.msg)
			}
			if rid != id {
				t.Errorf("error body has request_id %q, header %q", rid, id)
			}
			if tc.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	// The server still serves, and public routes need no key.
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	ts.postJSON(t, "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "max_tokens": 3}, &out, auth...)
	if len(out.Choices) != 1 {
		t.Fatalf("got %d choices, want 1", len(out.Choices))
	}
	for _, p := range []string{"/health", "/metrics", "/api/version"} {
		for _, m := range []string{"GET", "HEAD"} { // probes use either
			if resp, body := ts.do(t, m, p, ""); resp.StatusCode != 200 {
				t.Errorf("%s %s without a key: got %d %s, want 200", m, p, resp.StatusCode, body)
			}
		}
	}
	// A client's request ID is kept.
	resp, _ := ts.do(t, "GET", "/health", "", "X-Request-Id", "client-id.42")
	if got := resp.Header.Get("X-Request-Id"); got != "client-id.42" {
		t.Errorf("got X-Request-Id %q, want client-id.42", got)
	}
	resp, _ = ts.do(t, "GET", "/health", "", "X-Request-Id", "bad id with spaces")
	if got := resp.Header.Get("X-Request-Id"); got == "bad id with spaces" || got == "" {
		t.Errorf("got X-Request-Id %q, want a generated one", got)
	}
}

func TestLoopbackOnlyWithoutKeys(t *testing.T) {
	needModel(t)
	for _, addr := range []string{"0.0.0.0:4949", ":4949", "192.0.2.1:80", "example.com:80"} {
		_, err := New(Options{ModelPath: modelPath, Home: t.TempDir(), Addr: addr, Logger: slog.New(slog.DiscardHandler)})
		if err == nil || !strings.Contains(err.Error(), "refusing to listen beyond loopback") {
			t.Errorf("%s: got %v, want ErrNotLoopback", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:4949", "localhost:4949"} {
		if err := checkLoopback(addr); err != nil {
			t.Errorf("%s: got %v, want nil", addr, err)
		}
	}
	// With keys any address is allowed.
	s, err := New(Options{ModelPath: modelPath, Home: t.TempDir(), Addr: "0.0.0.0:0", APIKeysFile: writeKeys(t, keyAlice+" alice"),
		StoreNoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
