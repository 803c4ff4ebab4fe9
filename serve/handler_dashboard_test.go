package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/serve/dashboard"
)

// TestRoot: `/` is the dashboard for a browser and Ollama's probe text for
// anything else, on GET and HEAD, without an API key; other methods get
// 405.
func TestRoot(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.APIKeysFile = writeKeys(t, testKey+" alice") })
	for _, tc := range []struct {
		name, method, accept string
		status               int
		ctype, body          string
	}{
		{"ollama probe", "GET", "", 200, "text/plain; charset=utf-8", "Ollama is running"},
		{"curl", "GET", "*/*", 200, "text/plain; charset=utf-8", "Ollama is running"},
		{"json client", "GET", "application/json", 200, "text/plain; charset=utf-8", "Ollama is running"},
		{"browser", "GET", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", 200, "text/html; charset=utf-8", `id="tab-inference"`},
		{"head", "HEAD", "", 200, "text/plain; charset=utf-8", ""},
		{"post", "POST", "", 405, "application/json", "takes GET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h []string // GET and HEAD of / need no key; POST does, to reach the 405
			if tc.method == "POST" {
				h = []string{"Authorization", "Bearer " + testKey}
			}
			if tc.accept != "" {
				h = append(h, "Accept", tc.accept)
			}
			resp, body := ts.do(t, tc.method, "/", "", h...)
			if resp.StatusCode != tc.status {
				t.Fatalf("status: got %d %s, want %d", resp.StatusCode, body, tc.status)
			}
			if got := resp.Header.Get("Content-Type"); got != tc.ctype {
				t.Errorf("Content-Type: got %q, want %q", got, tc.ctype)
			}
			if tc.body != "" && !strings.Contains(string(body), tc.body) {
				t.Errorf("body: got %q, want it to contain %q", body, tc.body)
			}
			if tc.method == "HEAD" {
				if len(body) != 0 || resp.ContentLength != int64(len(ollamaProbe)) {
					t.Errorf("HEAD: got body %q and length %d, want none and %d", body, resp.ContentLength, len(ollamaProbe))
				}
			}
		})
	}
	// The page's files need no key, nor does the state for a loopback
	// client (TestDashboardAllow has the rule).
	for _, tc := range []struct {
		path   string
		header []string
		status int
		want   string
	}{
		{"/dashboard/app.js", nil, 200, "STATE_URL"},
		{"/dashboard/style.css", nil, 200, ".tag-measured"},
		{"/dashboard/api/state", nil, 200, `"totals"`}, // a loopback client, and no admin key configured
		{"/dashboard/nope.js", nil, 404, ""},
	} {
		resp, body := ts.do(t, "GET", tc.path, "", tc.header...)
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET %s: got %d %.80q, want %d containing %q", tc.path, resp.StatusCode, body, tc.status, tc.want)
		}
	}
}

// TestDashboardAllow: the state shows every tenant's packs, and /metrics
// the bytes the store grew by (which a tenant could read to tell whether
// another tenant's prompts hold a prefix it guesses), so on a server with
// tenants both follow the admin endpoint's rule: with an admin key only
// that key (never a tenant's), without one loopback clients.
func TestDashboardAllow(t *testing.T) {
	adminFile := filepath.Join(t.TempDir(), "admin.key")
	if err := os.WriteFile(adminFile, []byte(adminKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(o *Options) {
		o.APIKeysFile = writeKeys(t, testKey+" alice")
		o.AdminKeyFile = adminFile
	})
	for _, tc := range []struct {
		name   string
		header []string
		status int
	}{
		{"no key", nil, 401},
		{"a tenant's key", []string{"Authorization", "Bearer " + testKey}, 401},
		{"a wrong key", []string{"Authorization", "Bearer " + adminKey + "x"}, 401},
		{"the admin key", []string{"Authorization", "Bearer " + adminKey}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{dashboard.StatePath, "/metrics"} {
				resp, body := ts.do(t, "GET", path, "", tc.header...)
				if resp.StatusCode != tc.status {
					t.Errorf("GET %s: got %d %.100s, want %d", path, resp.StatusCode, body, tc.status)
				}
			}
		})
	}
	// The page itself needs no key.
	if resp, _ := ts.do(t, "GET", "/dashboard/app.js", ""); resp.StatusCode != 200 {
		t.Errorf("GET /dashboard/app.js: got %d, want 200", resp.StatusCode)
	}
}

// TestDashboardState: after requests the state's figures are measured and
// agree with what the API answered; what is not known is unavailable with
// a reason; the Cluster hook fills the Nodes tab.
func TestDashboardState(t *testing.T) {
	var cluster *dashboard.ClusterState
	ts := startServer(t, func(o *Options) {
		o.Cluster = func() *dashboard.ClusterState { return cluster }
	})
	state := func() dashboard.State {
		t.Helper()
		resp, body := ts.do(t, "GET", "/dashboard/api/state", "")
		if resp.StatusCode != 200 {
			t.Fatalf("state: %d %s", resp.StatusCode, body)
		}
		var st dashboard.State
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := state()
	for name, f := range map[string]dashboard.Figure{
		"hit_rate": st.Totals["hit_rate"], "ttft_mean": st.Totals["ttft_mean"], "bytes_saved": st.Store.Stats["bytes_saved"],
	} {
		if f.Tag != dashboard.TagUnavailable || f.Reason == "" || f.Value != nil {
			t.Errorf("fresh server %s: got %+v, want unavailable with a reason and no value", name, f)
		}
	}
	if st.Nodes.Tag != dashboard.TagUnavailable || st.Nodes.Cluster != nil {
		t.Errorf("nodes without a cluster: got %+v, want unavailable", st.Nodes)
	}
	if f := st.Server.Settings["parallel"]; f.Tag != dashboard.TagConfigured || f.Value == nil || *f.Value != 1 || f.Source != "--parallel" {
		t.Errorf("parallel: got %+v, want configured 1 from --parallel", f)
	}
	if f := st.Server.Settings["ctx"]; f.Value == nil || *f.Value != 512 {
		t.Errorf("ctx: got %+v, want configured 512", f)
	}

	prompt := infertest.Story(5, 120)
	var cached []int
	for range 2 {
		var a struct {
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				CompletionTokens    int `json:"completion_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		ts.postJSON(t, "/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": prompt}},
			"max_tokens": 4, "temperature": 0}, &a)
		cached = append(cached, a.Usage.PromptTokensDetails.CachedTokens)
		if err := ts.s.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if cached[0] != 0 || cached[1] == 0 {
		t.Fatalf("cached tokens: got %v, want 0 then a warm prefix", cached)
	}
	cluster = &dashboard.ClusterState{ClusterID: "c0ffee", Node: "a", Peers: []dashboard.PeerState{{Name: "b", Active: true}}}
	st = state()
	val := func(f dashboard.Figure) float64 {
		if f.Value == nil {
			t.Fatalf("figure %+v has no value", f)
		}
		return *f.Value
	}
	if f := st.Totals["requests"]; f.Tag != dashboard.TagMeasured || val(f) != 2 || !strings.HasPrefix(f.Window, "since start") {
		t.Errorf("requests: got %+v, want measured 2 since start", f)
	}
	if got := val(st.Totals["cached_store"]); got != float64(cached[1]) {
		t.Errorf("cached_store: got %v, want %d (the API's cached_tokens)", got, cached[1])
	}
	if f := st.Totals["hit_rate"]; f.Tag != dashboard.TagMeasured || val(f) <= 0 || val(f) >= 1 {
		t.Errorf("hit_rate: got %+v, want measured between 0 and 1", f)
	}
	if f := st.Store.Stats["packs"]; val(f) < 1 {
		t.Errorf("packs: got %+v, want at least 1", f)
	}
	if len(st.Store.Packs) == 0 || st.Store.Packs[0].Model != ts.s.ModelID() || st.Store.Packs[0].Tokens == 0 {
		t.Errorf("pack rows: got %+v, want this model's packs", st.Store.Packs)
	}
	if f := st.Store.Stats["bytes_saved"]; f.Tag != dashboard.TagMeasured || val(f) <= 0 {
		t.Errorf("bytes_saved: got %+v, want measured and positive", f)
	}
	if len(st.Recent) != 2 || st.Recent[0].CachedTokens != cached[1] || st.Recent[0].RestoreMS == nil || st.Recent[0].PrefillAt != "local" {
		t.Errorf("recent: got %+v, want the two requests newest first, the warm one restored locally", st.Recent)
	}
	n := 0
	for _, p := range st.Series.Points {
		n += p.Requests
	}
	if n != 2 || len(st.Series.Points) != int(dashboard.SeriesWindow/dashboard.SeriesStep) || st.Series.Tag != dashboard.TagMeasured {
		t.Errorf("series: %d requests in %d points (%s), want 2 in %d, measured", n, len(st.Series.Points), st.Series.Tag,
			int(dashboard.SeriesWindow/dashboard.SeriesStep))
	}
	if st.Nodes.Tag != dashboard.TagMeasured || st.Nodes.Cluster == nil || st.Nodes.Cluster.Node != "a" {
		t.Errorf("nodes with a cluster: got %+v, want measured, node a", st.Nodes)
	}
	for name, lt := range map[string]dashboard.ListTag{"slots": st.Live.SlotsTag, "recent": st.RecentTag,
		"packs": st.Store.PacksTag, "receipts": st.Receipts.ListTag} {
		if lt.Tag != dashboard.TagMeasured || lt.Window == "" || lt.Source == "" {
			t.Errorf("%s table tag: got %+v, want measured with a window and a source", name, lt)
		}
	}
	if st.Receipts.Total.Tag != dashboard.TagMeasured || len(st.Receipts.List) != 0 {
		t.Errorf("receipts: got %+v, want measured and none", st.Receipts)
	}
}

const (
	testKey  = "dashboard-test-key-0001"
	adminKey = "dashboard-admin-key-0001"
)

// syncBuf is a bytes.Buffer safe for the server's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDashboardPollsLogDebug: the page's polls of the state log at debug
// level, not info; other requests still log at info.
func TestDashboardPollsLogDebug(t *testing.T) {
	var logs syncBuf
	ts := startServer(t, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	for _, p := range []string{dashboard.StatePath, dashboard.StatePath, "/health"} {
		if resp, body := ts.do(t, "GET", p, ""); resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", p, resp.StatusCode, body)
		}
	}
	ts.stop(t) // the access log line is written after the answer: stop to have them all
	out := logs.String()
	if strings.Contains(out, "path="+dashboard.StatePath) {
		t.Errorf("state polls logged at info:\n%s", out)
	}
	if !strings.Contains(out, "path=/health") {
		t.Errorf("GET /health not logged at info:\n%s", out)
	}
}

// TestLocalPagesOnly: a server without --api-keys serves this machine's
// own clients; a web page from elsewhere in a local browser (a host name
// that resolves to 127.0.0.1, or another site's form or script) is
// refused on every route that reads or changes the cache, as on the admin
// routes.
func TestLocalPagesOnly(t *testing.T) {
	ts := startServer(t, nil)
	body := `{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":2}`
	for _, tc := range []struct {
		name   string
		header []string
		status int
	}{
		{"this machine's client", nil, 200},
		{"this server's own page", []string{"Origin", ts.url}, 200},
		{"a rebound host name", []string{"Host", "attacker.example:4949", "Origin", "http://attacker.example:4949"}, 403},
		{"another site's page", []string{"Origin", "http://attacker.example"}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if resp, got := ts.post(t, "/v1/chat/completions", body, tc.header...); resp.StatusCode != tc.status {
				t.Errorf("chat: got %d %.200s, want %d", resp.StatusCode, got, tc.status)
			}
			if resp, got := ts.post(t, "/slots/0?action=erase", "", tc.header...); (resp.StatusCode == 403) != (tc.status == 403) {
				t.Errorf("slot erase: got %d %.200s, want 403: %v", resp.StatusCode, got, tc.status == 403)
			}
		})
	}
}
