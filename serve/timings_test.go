package serve

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/infertest"
)

// TestTimings: "timings": true adds muser's timings object to a chat
// completion and to a text completion, streamed or not, and its figures
// agree with the usage; a request without it is answered without the
// object.
func TestTimings(t *testing.T) {
	ts := startServer(t, nil)
	for _, route := range []struct {
		path   string
		prompt func() map[string]any
	}{
		{"/v1/chat/completions", func() map[string]any {
			return map[string]any{"messages": []map[string]string{{"role": "user", "content": infertest.Story(3, 120)}}}
		}},
		{"/v1/completions", func() map[string]any { return map[string]any{"prompt": infertest.Story(4, 120)} }},
	} {
		t.Run(route.path, func(t *testing.T) { testTimings(t, ts, route.path, route.prompt) })
	}
}

func testTimings(t *testing.T, ts *testServer, path string, prompt func() map[string]any) {
	req := func(extra map[string]any) map[string]any {
		m := prompt()
		m["max_tokens"], m["temperature"] = 6, 0
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	type answer struct {
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
		Timings *requestTimings `json:"timings"`
	}
	// A request without timings has no timings key at all.
	_, raw := ts.post(t, path, mustJSON(t, req(nil)))
	if strings.Contains(string(raw), `"timings"`) {
		t.Errorf("a request without timings: got %s, want no timings key", raw)
	}
	if err := ts.s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var a answer
	ts.postJSON(t, path, req(map[string]any{"timings": true}), &a)
	tm := a.Timings
	if tm == nil {
		t.Fatal("timings: true: got no timings object")
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"cached_tokens", tm.CachedTokens, a.Usage.PromptTokensDetails.CachedTokens},
		{"prompt_tokens", tm.PromptTokens, a.Usage.PromptTokens},
		{"prefill_tokens", tm.PrefillTokens, a.Usage.PromptTokens - a.Usage.PromptTokensDetails.CachedTokens},
		{"cache_source", tm.CacheSource, "store"},
		{"prefill_at", tm.PrefillAt, "local"},
		{"decode_tokens", tm.DecodeTokens, 5},
		{"remote_prefill_ms is null", tm.RemotePrefillMS == nil, true},
		{"restore_ms is set", tm.RestoreMS != nil, true},
		{"prefill_ms is set", tm.PrefillMS != nil, true},
		{"ttft_ms is set", tm.TTFTMS != nil, true},
		{"decode_tokens_per_second is set", tm.DecodeTokensPerSecond != nil, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if tm.CachedTokens == 0 {
		t.Errorf("cached_tokens: got 0, want the warm prefix (the same prompt was published before)")
	}
	if tm.TTFTMS != nil && tm.PrefillMS != nil && *tm.TTFTMS < *tm.PrefillMS {
		t.Errorf("ttft_ms %v is less than prefill_ms %v", *tm.TTFTMS, *tm.PrefillMS)
	}

	for _, tc := range []struct {
		name  string
		extra map[string]any
	}{
		{"stream", map[string]any{"stream": true, "timings": true}},
		{"stream with usage", map[string]any{"stream": true, "timings": true, "stream_options": map[string]any{"include_usage": true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, body := ts.post(t, path, mustJSON(t, req(tc.extra)))
			evs := sseEvents(body)
			if len(evs) < 3 || evs[len(evs)-1] != "[DONE]" {
				t.Fatalf("got events %q, want chunks and [DONE]", evs)
			}
			var with []int
			for i, e := range evs[:len(evs)-1] {
				var c answer
				if err := json.Unmarshal([]byte(e), &c); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if c.Timings != nil {
					with = append(with, i)
					if c.Timings.CachedTokens != a.Timings.CachedTokens {
						t.Errorf("streamed cached_tokens: got %d, want %d", c.Timings.CachedTokens, a.Timings.CachedTokens)
					}
				}
			}
			if len(with) != 1 || with[0] != len(evs)-2 {
				t.Errorf("timings on events %v of %d, want on the last chunk (%d) only", with, len(evs)-1, len(evs)-2)
			}
		})
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestChatTimingsBadInput: a timings field of the wrong type is a 400 in
// the OpenAI shape naming it.
func TestChatTimingsBadInput(t *testing.T) {
	ts := startServer(t, nil)
	for _, tc := range []struct{ name, value, msg string }{
		{"string", `"yes"`, "got a string"},
		{"number", `1`, "got a number"},
		{"object", `{}`, "got an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := ts.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"timings":`+tc.value+`}`)
			var e struct {
				Error struct{ Code, Param, Message string }
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 400 || e.Error.Code != "invalid_type" || e.Error.Param != "timings" || !strings.Contains(e.Error.Message, tc.msg) {
				t.Errorf("got %d %+v, want 400 invalid_type for param timings saying %q", resp.StatusCode, e.Error, tc.msg)
			}
		})
	}
}
