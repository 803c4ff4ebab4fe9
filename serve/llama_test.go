package serve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestLlamaPromptForms sends /completion's prompt in each of llama.cpp's
// forms: one prompt (a string, token ids, token ids mixed with strings,
// or an array holding one of those) answers as the string does; several
// prompts (strings only, or arrays of prompts), which llama-server answers
// with one result each, are refused rather than run as one.
func TestLlamaPromptForms(t *testing.T) {
	ts := startServer(t, nil)
	complete := func(prompt string) (int, string) {
		t.Helper()
		resp, body := ts.post(t, "/completion", `{"prompt":`+prompt+`,"n_predict":4,"temperature":0}`)
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, string(body)
		}
		var out struct {
			Content string `json:"content"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("%v in %s", err, body)
		}
		return resp.StatusCode, out.Content
	}
	status, want := complete(`"Once upon a time"`)
	if status != http.StatusOK {
		t.Fatalf("the string prompt: got %d %s", status, want)
	}
	for _, tc := range []struct {
		name, prompt string
		status       int
		msg          string // the content for a 200, a part of the error otherwise
	}{
		{"token ids", `[1, 403, 407, 261, 378]`, 200, want},
		{"one string in an array", `["Once upon a time"]`, 200, want},
		{"token ids in an array", `[[1, 403, 407, 261, 378]]`, 200, want},
		{"mixed", `[1, 403, " upon a time"]`, 200, want},
		{"mixed, a string first", `["Once", 407, " a time"]`, 200, want},
		{"several strings", `["Once", " upon a time"]`, 400, "one prompt per request"},
		{"several token arrays", `[[1, 403], [407]]`, 400, "one prompt per request"},
		{"a string and token ids", `["Once", [407]]`, 400, "one prompt per request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, got := complete(tc.prompt)
			if status != tc.status {
				t.Fatalf("got %d %s, want %d", status, got, tc.status)
			}
			if tc.status == http.StatusOK && got != tc.msg || tc.status != http.StatusOK && !strings.Contains(got, tc.msg) {
				t.Errorf("got %q, want %q", got, tc.msg)
			}
		})
	}
}

// TestWrongMethod checks that every route answers a method it does not
// take with 405 and an Allow header naming the ones it takes, routes with
// a path parameter (a slot's id, a model's, a response's) included, and
// that a path no route has is a 404.
func TestWrongMethod(t *testing.T) {
	ts := startServer(t, nil)
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/slots/0", 405, "POST"},
		{"DELETE", "/slots/0", 405, "POST"},
		{"POST", "/slots", 405, "GET"},
		{"POST", "/v1/models/stories260K", 405, "GET"},
		{"POST", "/v1/responses/resp_x", 405, "GET, DELETE"},
		{"GET", "/api/generate", 405, "POST"},
		{"GET", "/completion", 405, "POST"},
		{"POST", "/", 405, "GET"},
		{"GET", "/slots/0/x", 404, ""},
		{"GET", "/api/nothing", 404, ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			resp, body := ts.do(t, tc.method, tc.path, "")
			if resp.StatusCode != tc.status {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tc.status)
			}
			if got := resp.Header.Get("Allow"); got != tc.allow {
				t.Errorf("got Allow %q, want %q", got, tc.allow)
			}
			if tc.status == 405 && !strings.Contains(string(body), "this route takes "+tc.allow) {
				t.Errorf("got %s, want it to say the route takes %s", body, tc.allow)
			}
		})
	}
}

// TestLlamaProbsStreamed checks /completion's completion_probabilities
// when streamed with n_probs: every chunk that has the field holds an
// array (a token's probabilities), and the final chunk, which adds no
// token, leaves it out as llama-server does, rather than answering null
// to clients that iterate over it.
func TestLlamaProbsStreamed(t *testing.T) {
	ts := startServer(t, nil)
	for _, tc := range []struct {
		name string
		body string
	}{
		{"stream", `{"prompt":"Once upon a time","n_predict":3,"n_probs":2,"temperature":0,"stream":true}`},
		{"stream with a stop", `{"prompt":"Once upon a time","n_predict":8,"n_probs":2,"temperature":0,"stream":true,"stop":["little"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := ts.post(t, "/completion", tc.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("got %d %s", resp.StatusCode, body)
			}
			evs := sseEvents(body)
			probs := 0
			for i, ev := range evs {
				var m map[string]json.RawMessage
				if err := json.Unmarshal([]byte(ev), &m); err != nil {
					t.Fatalf("%v in %s", err, ev)
				}
				p, ok := m["completion_probabilities"]
				last := i == len(evs)-1
				switch {
				case last && ok:
					t.Errorf("the final chunk has completion_probabilities %s, want none", p)
				case !last && (!ok || !bytes.HasPrefix(p, []byte("["))):
					t.Errorf("chunk %d: completion_probabilities %q, want an array", i, p)
				}
				var arr []llamaProb
				json.Unmarshal(p, &arr)
				probs += len(arr)
			}
			if probs == 0 {
				t.Errorf("no probabilities in %s", body)
			}
		})
	}
}

// TestGenerationSettingsStop checks that generation_settings.stop (of
// /completion's answer and /props' defaults) is an array, empty without
// stop strings, as llama-server answers it, never null.
func TestGenerationSettingsStop(t *testing.T) {
	ts := startServer(t, nil)
	for _, tc := range []struct {
		name, method, path, body string
		settings                 func(m map[string]json.RawMessage) json.RawMessage
		want                     string
	}{
		{"completion", "POST", "/completion", `{"prompt":"x","n_predict":1}`, func(m map[string]json.RawMessage) json.RawMessage {
			return m["generation_settings"]
		}, "[]"},
		{"completion with stops", "POST", "/completion", `{"prompt":"x","n_predict":1,"stop":["a"]}`, func(m map[string]json.RawMessage) json.RawMessage {
			return m["generation_settings"]
		}, `["a"]`},
		{"props", "GET", "/props", "", func(m map[string]json.RawMessage) json.RawMessage {
			var d struct {
				Params json.RawMessage `json:"params"`
			}
			json.Unmarshal(m["default_generation_settings"], &d)
			return d.Params
		}, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := ts.do(t, tc.method, tc.path, tc.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("got %d %s", resp.StatusCode, body)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatalf("%v in %s", err, body)
			}
			var settings struct {
				Stop json.RawMessage `json:"stop"`
			}
			if err := json.Unmarshal(tc.settings(m), &settings); err != nil {
				t.Fatalf("%v in %s", err, body)
			}
			if string(settings.Stop) != tc.want {
				t.Errorf("stop is %s, want %s", settings.Stop, tc.want)
			}
		})
	}
}
