package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/infertest"
)

// chatResult is what the tests read from a chat completion.
type chatResult struct {
	content string
	cached  int
	prompt  int
	finish  string
}

func chatBody(system, user string, seed, maxTokens int, extra map[string]any) map[string]any {
	b := map[string]any{
		"model": "stories260K",
		"messages": []any{
			map[string]any{"role": "system", "content": system},
			map[string]any{"role": "user", "content": user},
		},
		"seed": seed, "temperature": 0.9, "max_tokens": maxTokens,
	}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func (ts *testServer) chat(t testing.TB, body map[string]any, header ...string) chatResult {
	t.Helper()
	var out struct {
		Choices []struct {
			Message      struct{ Content string } `json:"message"`
			FinishReason string                   `json:"finish_reason"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	ts.postJSON(t, "/v1/chat/completions", body, &out, header...)
	if len(out.Choices) != 1 {
		t.Fatalf("got %d choices, want 1", len(out.Choices))
	}
	return chatResult{content: out.Choices[0].Message.Content, cached: out.Usage.PromptTokensDetails.CachedTokens,
		prompt: out.Usage.PromptTokens, finish: out.Choices[0].FinishReason}
}

// streamChat runs a streamed chat completion with usage and returns the
// concatenated content and the usage.
func (ts *testServer) streamChat(t testing.TB, body map[string]any, header ...string) chatResult {
	t.Helper()
	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	b, _ := json.Marshal(body)
	resp, raw := ts.post(t, "/v1/chat/completions", string(b), header...)
	if resp.StatusCode != 200 {
		t.Fatalf("got %d %s", resp.StatusCode, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("got Content-Type %q, want text/event-stream", ct)
	}
	evs := sseEvents(raw)
	if len(evs) < 3 || evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", evs)
	}
	var r chatResult
	for _, ev := range evs[:len(evs)-1] {
		var c struct {
			Choices []struct {
				Delta        struct{ Content *string } `json:"delta"`
				FinishReason *string                   `json:"finish_reason"`
			} `json:"choices"`
			Usage *usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("%v in %s", err, ev)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				r.content += *ch.Delta.Content
			}
			if ch.FinishReason != nil {
				r.finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			r.cached, r.prompt = c.Usage.PromptTokensDetails.CachedTokens, c.Usage.PromptTokens
		}
	}
	return r
}

// TestPrefixReuse: a second request sharing a long prefix reports cached
// tokens and gives the output it gives without a cache; the same after a
// restart.
func TestPrefixReuse(t *testing.T) {
	home := t.TempDir()
	opts := func(o *Options) { o.Home = home }
	ts := startServer(t, opts)
	system := infertest.Story(0, 220)
	first := ts.chat(t, chatBody(system, "Tell me a story.", 11, 12, nil))
	if first.cached != 0 || first.prompt < 128 {
		t.Fatalf("first request: %d cached of %d prompt tokens; want 0 of at least two blocks", first.cached, first.prompt)
	}
	if err := ts.s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := chatBody(system, "What did Lily do?", 5, 20, nil)
	warm := ts.chat(t, second)
	if warm.cached == 0 || warm.cached%ts.s.store.BlockTokens() != 0 || warm.cached >= warm.prompt {
		t.Fatalf("second request: %d cached of %d prompt tokens; want a positive whole number of blocks", warm.cached, warm.prompt)
	}
	cold := startServer(t, nil).chat(t, chatBody(system, "What did Lily do?", 5, 20, nil))
	if cold.cached != 0 {
		t.Fatalf("fresh server: got %d cached tokens, want 0", cold.cached)
	}
	if warm.content != cold.content || warm.finish != cold.finish {
		t.Errorf("with cache %q (%s), without %q (%s)", warm.content, warm.finish, cold.content, cold.finish)
	}
	// Restart on the same home; this time streamed.
	ts.stop(t)
	ts2 := startServer(t, opts)
	again := ts2.streamChat(t, chatBody(system, "What did Lily do?", 5, 20, nil))
	if again.cached == 0 {
		t.Errorf("after restart: got 0 cached tokens, want > 0")
	}
	if again.content != cold.content {
		t.Errorf("after restart %q, without cache %q", again.content, cold.content)
	}
	// The store's hits show in the metrics.
	_, metrics := ts2.do(t, "GET", "/metrics", "")
	if v := metricValue(t, metrics, `muser_cached_tokens_total{source="store"}`); v != float64(again.cached) {
		t.Errorf("muser_cached_tokens_total{source=\"store\"} is %v, want %d", v, again.cached)
	}
}

// TestTenantIsolation: two tenants sending the same prompt do not share
// cache entries; nor do two cache_salt values of one tenant.
func TestTenantIsolation(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.APIKeysFile = writeKeys(t, keyAlice+" alice", keyBob+" bob") })
	alice := []string{"Authorization", "Bearer " + keyAlice}
	bob := []string{"Authorization", "Bearer " + keyBob}
	system := infertest.Story(0, 200)
	body := func(extra map[string]any) map[string]any { return chatBody(system, "Go on.", 3, 4, extra) }
	if r := ts.chat(t, body(nil), alice...); r.cached != 0 {
		t.Fatalf("alice first: got %d cached tokens, want 0", r.cached)
	}
	ts.s.Sync(context.Background())
	if r := ts.chat(t, body(nil), bob...); r.cached != 0 {
		t.Errorf("bob, same prompt: got %d cached tokens, want 0", r.cached)
	}
	if r := ts.chat(t, body(map[string]any{"cache_salt": "project-x"}), alice...); r.cached != 0 {
		t.Errorf("alice with a cache_salt: got %d cached tokens, want 0", r.cached)
	}
	ts.s.Sync(context.Background())
	if r := ts.chat(t, body(nil), alice...); r.cached == 0 {
		t.Errorf("alice again: got 0 cached tokens, want > 0")
	}
	if r := ts.chat(t, body(nil), bob...); r.cached == 0 {
		t.Errorf("bob again: got 0 cached tokens, want > 0")
	}
}

// TestConcurrentStreams: 8 concurrent streams each get exactly the output
// they get alone.
func TestConcurrentStreams(t *testing.T) {
	const n = 8
	ts := startServer(t, func(o *Options) { o.Parallel = n; o.PrefillChunk = 32; o.StepTokens = 64 })
	bodies := func(salt string) []map[string]any {
		out := make([]map[string]any, n)
		for i := range out {
			// A salt per stream: the prompts share their first words, and
			// no stream may restore what another published.
			out[i] = chatBody(infertest.Story(0, 20+9*i), fmt.Sprintf("Story %d.", i), 100+i, 24+2*i,
				map[string]any{"cache_salt": fmt.Sprintf("%s-%d", salt, i)})
		}
		return out
	}
	alone := make([]chatResult, n)
	for i, b := range bodies("alone") {
		alone[i] = ts.streamChat(t, b)
	}
	got := make([]chatResult, n)
	var wg sync.WaitGroup
	for i, b := range bodies("together") {
		wg.Go(func() { got[i] = ts.streamChat(t, b) })
	}
	wg.Wait()
	for i := range got {
		if got[i].content != alone[i].content || got[i].finish != alone[i].finish || got[i].cached != 0 {
			t.Errorf("stream %d: together %q (%s, %d cached), alone %q (%s)", i, got[i].content, got[i].finish, got[i].cached,
				alone[i].content, alone[i].finish)
		}
	}
}

// TestDisconnectFreesSlot: a client that goes away mid-stream frees its
// slot, which /slots and /metrics show, and the next request is served.
func TestDisconnectFreesSlot(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.MaxQueue = -1 })
	b, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Once"}},
		"stream": true, "max_tokens": 450, "seed": 1, "logit_bias": eogBias(ts)})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+"/v1/chat/completions", strings.NewReader(string(b)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	for range 3 { // the role chunk and two tokens
		if _, err := rd.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		rd.ReadString('\n')
	}
	var slots []map[string]any
	_, body := ts.do(t, "GET", "/slots", "")
	json.Unmarshal(body, &slots)
	if len(slots) != 1 || slots[0]["is_processing"] != true {
		t.Fatalf("while streaming, /slots shows %s; want one processing slot", body)
	}
	// With the slot busy and no queue, another request is refused.
	resp2, body2 := ts.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":1}`)
	if resp2.StatusCode != http.StatusTooManyRequests || resp2.Header.Get("Retry-After") == "" {
		t.Errorf("with the only slot busy: got %d %s (Retry-After %q), want 429 with Retry-After", resp2.StatusCode, body2, resp2.Header.Get("Retry-After"))
	}
	cancel()
	resp.Body.Close()
	for {
		_, body = ts.do(t, "GET", "/slots", "")
		json.Unmarshal(body, &slots)
		if slots[0]["is_processing"] == false {
			break
		}
	}
	_, metrics := ts.do(t, "GET", "/metrics", "")
	if v := metricValue(t, metrics, "muser_slots_busy"); v != 0 {
		t.Errorf("muser_slots_busy is %v after the disconnect, want 0", v)
	}
	if v := metricValue(t, metrics, "muser_generated_tokens_total"); v >= 450 {
		t.Errorf("the abandoned request generated %v tokens; it should have stopped before its 450", v)
	}
	if r := ts.chat(t, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Hi"}}, "max_tokens": 2}); r.finish != "length" {
		t.Errorf("next request: finish %q, want length", r.finish)
	}
}

// eogBias bans the end-of-generation tokens, so a generation runs to its
// max_tokens.
func eogBias(ts *testServer) map[string]float64 {
	m := map[string]float64{}
	for _, id := range ts.s.model.tok.EOGs() {
		m[strconv.Itoa(int(id))] = -100
	}
	return m
}

// metricValue reads one sample from a Prometheus text exposition.
func metricValue(t testing.TB, exposition []byte, name string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`)
	m := re.FindSubmatch(exposition)
	if m == nil {
		t.Fatalf("metric %s not found", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
