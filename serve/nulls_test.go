package serve

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNullsAndUTF8: null inside token arrays, stop lists and logit_bias,
// and invalid UTF-8 in strings, are 400s naming the field, in each route
// family's shape (encoding/json would have read a null token as token 0
// and replaced invalid bytes with U+FFFD); true and 1.5 stay 400s.
func TestNullsAndUTF8(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.Ctx = 128 })
	for _, tc := range []struct {
		name, path, body string
		param, msg       string // param: OpenAI's param, else a part of the message
	}{
		{"completions null token", "/v1/completions", `{"prompt":[1,null,3]}`, "prompt[1]", "prompt[1] is null"},
		{"completions null first", "/v1/completions", `{"prompt":[null]}`, "prompt[0]", "is null"},
		{"completions nested null", "/v1/completions", `{"prompt":[[1,null]]}`, "prompt[0][1]", "prompt[0][1] is null"},
		{"completions true", "/v1/completions", `{"prompt":[1,true]}`, "prompt[1]", "must be a token id or a string"},
		{"completions 1.5", "/v1/completions", `{"prompt":[1,1.5]}`, "prompt[1]", "must be a token id or a string"},
		{"completions null stop", "/v1/completions", `{"prompt":"x","stop":["a",null]}`, "stop", "not all strings"},
		{"chat null logit bias", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"logit_bias":{"5":null}}`, `logit_bias["5"]`, "got null, want a number"},
		{"chat invalid utf-8", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\xffb\"}]}", "messages[0].content", "invalid UTF-8"},
		{"llama null token", "/completion", `{"prompt":[1,null]}`, "", "prompt[1] is null"},
		{"llama null bias", "/completion", `{"prompt":"x","logit_bias":[[5,null]]}`, "", "element 0: the bias must be a number or false"},
		{"llama null bias token", "/completion", `{"prompt":"x","logit_bias":[[null,1]]}`, "", "element 0: want [token id, bias]"},
		{"llama null bias object", "/completion", `{"prompt":"x","logit_bias":{"5":null}}`, "", "got null, want a number"},
		{"llama null stop", "/completion", `{"prompt":"x","stop":[null]}`, "", `"stop[0]": got null, want a string`},
		{"detokenize null", "/detokenize", `{"tokens":[1,null]}`, "", `"tokens[1]": got null, want an integer`},
		{"detokenize true", "/detokenize", `{"tokens":[1,true]}`, "", `"tokens[1]": got a boolean, want an integer`},
		{"tokenize invalid utf-8", "/tokenize", "{\"content\":\"\xc3\"}", "", `"content": the string holds invalid UTF-8`},
		{"ollama null context", "/api/generate", `{"model":"stories260K","prompt":"x","context":[1,null]}`, "", `"context[1]": got null, want an integer`},
		{"ollama null stop", "/api/generate", `{"model":"stories260K","prompt":"x","options":{"stop":["a",null]}}`, "", `"options.stop[1]": got null, want a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := ts.post(t, tc.path, tc.body)
			if resp.StatusCode != 400 {
				t.Fatalf("got %d %s, want 400", resp.StatusCode, body)
			}
			var e struct {
				Error json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("%v in %s", err, body)
			}
			if familyOf(tc.path) == famOpenAI {
				var oe struct {
					Param   string `json:"param"`
					Message string `json:"message"`
				}
				json.Unmarshal(e.Error, &oe)
				if oe.Param != tc.param || !strings.Contains(oe.Message, tc.msg) {
					t.Errorf("got param %q message %q, want param %q and %q", oe.Param, oe.Message, tc.param, tc.msg)
				}
				return
			}
			var msg string
			if json.Unmarshal(e.Error, &msg) != nil { // Ollama: a string; llama.cpp: an object
				var le struct {
					Message string `json:"message"`
				}
				json.Unmarshal(e.Error, &le)
				msg = le.Message
			}
			if !strings.Contains(msg, tc.msg) {
				t.Errorf("got message %q, want it to name %q", msg, tc.msg)
			}
		})
	}
	// The forms that were accepted stay accepted.
	for _, body := range []string{`{"prompt":[1,2,3],"max_tokens":1}`, `{"prompt":[[1,2]],"max_tokens":1}`, `{"prompt":"x","max_tokens":1,"stop":null}`} {
		if resp, b := ts.post(t, "/v1/completions", body); resp.StatusCode != 200 {
			t.Errorf("POST /v1/completions %s: got %d %s, want 200", body, resp.StatusCode, b)
		}
	}
}
