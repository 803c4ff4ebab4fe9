package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/serve"
	"github.com/muserhq/muser/serve/dashboard"
	"github.com/muserhq/muser/store"
)

const modelPath = "../../../shared/models/stories260K.gguf"

// browserRequired says whether a missing browser fails the test instead
// of skipping it (CI, or MUSER_REQUIRE_BROWSER=1).
func browserRequired() bool {
	return os.Getenv("CI") == "true" || os.Getenv("MUSER_REQUIRE_BROWSER") == "1"
}

// findBrowser returns Chromium's path, skipping (or, where a browser is
// required, failing) the test when there is none.
func findBrowser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no headless browser: install Debian's chromium (apt-get install -y chromium)"
	if browserRequired() {
		t.Fatal(msg + " (required: CI=true or MUSER_REQUIRE_BROWSER=1)")
	}
	t.Skip("skipping: " + msg)
	return ""
}

// artifactDir is where the test keeps its screenshots: under
// $MUSER_TEST_ARTIFACTS when set, else testdata/screenshots (ignored by
// git).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("testdata", "screenshots")
	if d := os.Getenv("MUSER_TEST_ARTIFACTS"); d != "" {
		dir = filepath.Join(d, "dashboard")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startServer serves the test model on 127.0.0.1:0 until the test ends.
func startServer(t *testing.T, mod func(*serve.Options)) (*serve.Server, string) {
	t.Helper()
	if _, err := os.Stat(modelPath); err != nil {
		t.Skipf("skipping: %s is absent (the shared test material lives beside the clone): %v", modelPath, err)
	}
	// The server's warnings are kept and printed if the test fails, so
	// a failure says what the server saw (a refused or failed restore).
	logs := &syncBuffer{}
	opts := serve.Options{ModelPath: modelPath, Home: t.TempDir(), StoreNoSync: true, Ctx: 512, Threads: 2,
		Addr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})), Version: "test"}
	if mod != nil {
		mod(&opts)
	}
	s, err := serve.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if t.Failed() {
			t.Logf("server warnings:\n%s", logs.String())
		}
	})
	return s, "http://" + ln.Addr().String()
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// chatAnswer is what the test reads of a non-streamed chat completion.
type chatAnswer struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Timings struct {
		PrefillAt string `json:"prefill_at"`
	} `json:"timings"`
}

func chat(t *testing.T, url, prompt string, maxTokens int) chatAnswer {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": prompt}},
		"max_tokens": maxTokens, "temperature": 0, "timings": true})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
	var a chatAnswer
	if err := json.Unmarshal(b, &a); err != nil || len(a.Choices) != 1 {
		t.Fatalf("chat: %v in %s", err, b)
	}
	return a
}

// freshPoll waits until the page shows a state it asked for after this
// action began (a tab click starts a poll).
func freshPoll() chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var started int
		if err := chromedp.Evaluate(`Number(document.body.dataset.pollStarted)`, &started).Do(ctx); err != nil {
			return err
		}
		var ok bool
		return chromedp.Poll(fmt.Sprintf(`Number(document.body.dataset.pollShown) >= %d`, started), &ok).Do(ctx)
	})
}

// shown waits until panel is visible and holds an element matching sel.
// It asks in JavaScript rather than by DOM node, because each poll
// re-renders the tables.
func shown(panel, sel string) chromedp.Action {
	var ok bool
	return chromedp.Poll(fmt.Sprintf(`(() => { const p = document.querySelector(%q); return !!p && !p.hidden && !!p.querySelector(%q); })()`,
		panel, sel), &ok)
}

// adminClick clicks an admin button of the Store tab, waits for the
// admin endpoint's answer at path, decodes the JSON the page shows into
// out, and returns the HTTP status the page shows.
func adminClick(t *testing.T, ctx context.Context, button, path string, out any) string {
	t.Helper()
	var ok bool
	var text, status string
	if err := chromedp.Run(ctx,
		chromedp.Click(button),
		chromedp.Poll(fmt.Sprintf(`(() => { const s = document.getElementById("admin-status"), o = document.getElementById("admin-result");
			return o.dataset.op === %q && (s.dataset.state === "done" || s.dataset.state === "error"); })()`, path), &ok),
		chromedp.Evaluate(`document.getElementById("admin-result").textContent`, &text),
		chromedp.Evaluate(`document.getElementById("admin-result").dataset.status`, &status),
	); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(text), out); err != nil {
		t.Fatalf("%s: the page shows %q: %v", path, text, err)
	}
	return status
}

// figure is what the page shows of one tagged number.
type figure struct {
	Name   string `json:"name"`
	Tag    string `json:"tag"`
	Value  string `json:"value"`
	Title  string `json:"title"`
	Hidden bool   `json:"hidden"`
}

// figuresJS collects every tagged figure the page shows.
const figuresJS = `Array.from(document.querySelectorAll(".fig")).map(e => ({name: e.dataset.figure, tag: e.dataset.tag,
  value: e.dataset.value || e.textContent, title: e.title || "", hidden: !e.offsetParent}))`

// TestBrowser drives the dashboard in headless Chromium: a prompt sent
// through the Inference tab streams the same text and shows the same
// cached-token figure as the API answers for it; every tab opens and
// shows the server's state; every number carries a tag. Screenshots of
// each tab are kept (artifactDir).
func TestBrowser(t *testing.T) {
	browser := findBrowser(t)
	cluster := &dashboard.ClusterState{ClusterID: "5eed5eed5eed5eed", Node: "alpha", ReplAddr: "127.0.0.1:7000",
		Peers: []dashboard.PeerState{{Name: "beta", Addr: "127.0.0.1:7001", Active: true, ReplicateTo: true,
			Queue: dashboard.Measured(0, "packs", "now", "replicator"), Pushed: dashboard.Measured(3, "packs", "since start", "replicator"),
			Refused: dashboard.Measured(0, "packs", "since start", "replicator"), Retries: dashboard.Measured(1, "attempts", "since start", "replicator"),
			Dropped:  dashboard.Measured(0, "packs", "since start", "replicator"),
			LastPush: &dashboard.PushState{Time: time.Now(), Pack: strings.Repeat("ab", 32), OK: true, Moved: 2, Chunks: 3, MovedBytes: 4096, DurationMS: 1.5}}}}
	s, url := startServer(t, func(o *serve.Options) { o.Cluster = func() *dashboard.ClusterState { return cluster } })

	// Warm the store with the prompt, so the page's request restores a
	// prefix; and leave two receipts for the Receipts tab.
	prompt := infertest.Story(11, 110)
	const maxTokens = 24
	chat(t, url, prompt, maxTokens)
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var receipts []store.Receipt
	for _, d := range []string{"first refusal (test)", "second refusal (test)"} {
		r, err := s.Store().AddReceipt(store.Receipt{Reason: pack.ReasonIdentityMismatch, Source: "peer:gamma", Detail: d,
			Fields: []pack.FieldDiff{{Field: "model", Want: "aaaa", Got: "bbbb"}}})
		if err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, r)
	}

	actx, cancelA := chromedp.NewExecAllocator(t.Context(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000))...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	dir := artifactDir(t)
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var png []byte
			if err := chromedp.FullScreenshot(&png, 100).Do(ctx); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
		})
	}

	// Inference: send the prompt through the page.
	var reply, status string
	var figs []figure
	if err := chromedp.Run(ctx,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(`#conn[data-state="ok"]`),
		chromedp.SetValue(`#prompt`, prompt),
		chromedp.SetValue(`#max-tokens`, fmt.Sprint(maxTokens)),
		chromedp.SetValue(`#temperature`, "0"),
		chromedp.Click(`#send`),
		chromedp.WaitVisible(`#req-status[data-state="done"], #req-status[data-state="error"]`),
		chromedp.Text(`#req-status`, &status),
		chromedp.Text(`#reply`, &reply),
		chromedp.Evaluate(figuresJS, &figs),
		shot("inference"),
	); err != nil {
		t.Fatal(err)
	}
	if status != "done" {
		t.Fatalf("the page's request: status %q, want done", status)
	}
	byName := map[string]figure{}
	for _, f := range figs {
		byName[f.Name] = f
	}
	// The API answers the same request (greedy, same prefix in the
	// store) with the same text and the same cached tokens.
	api := chat(t, url, prompt, maxTokens)
	if want := api.Choices[0].Message.Content; reply != want {
		t.Errorf("streamed text in the page: got %q, want the API's %q", reply, want)
	}
	want := api.Usage.PromptTokensDetails.CachedTokens
	if want == 0 {
		t.Errorf("the API's cached_tokens is 0; want a warm prefix (the prompt was published before)")
	}
	if f := byName["cached_tokens"]; f.Value != fmt.Sprint(want) || f.Tag != dashboard.TagMeasured {
		t.Errorf("cached tokens in the page: got %q (%s), want %d, measured", f.Value, f.Tag, want)
	}
	if f := byName["prefill_at"]; f.Value != api.Timings.PrefillAt || f.Value != "local" {
		t.Errorf("prefill ran: got %q, want %q", f.Value, api.Timings.PrefillAt)
	}
	for _, name := range []string{"restore_ms", "prefill_ms", "ttft_ms", "decode_tokens_per_second"} {
		if f := byName[name]; f.Tag != dashboard.TagMeasured || f.Value == "" {
			t.Errorf("%s in the page: got %+v, want a measured value", name, f)
		}
	}
	if f := byName["remote_prefill_ms"]; f.Tag != dashboard.TagUnavailable {
		t.Errorf("remote_prefill_ms without a producer: got %+v, want unavailable", f)
	}

	// Every number on every tab carries a tag; an unavailable one says
	// why.
	checkTags := func(tab string) {
		if err := chromedp.Run(ctx, chromedp.Evaluate(figuresJS, &figs)); err != nil {
			t.Fatal(err)
		}
		visible := 0
		for _, f := range figs {
			if f.Hidden {
				continue
			}
			visible++
			switch f.Tag {
			case dashboard.TagMeasured, dashboard.TagConfigured:
				if f.Value == "" {
					t.Errorf("%s tab: figure %s is %s without a value", tab, f.Name, f.Tag)
				}
			case dashboard.TagUnavailable:
				if f.Title == "" {
					t.Errorf("%s tab: figure %s is unavailable without a reason", tab, f.Name)
				}
			default:
				t.Errorf("%s tab: figure %s has tag %q, want measured, configured or unavailable", tab, f.Name, f.Tag)
			}
		}
		if visible == 0 {
			t.Errorf("%s tab: no figure shown", tab)
		}
		// Each table's heading carries its rows' tag.
		var lists []figure
		if err := chromedp.Run(ctx, chromedp.Evaluate(`Array.from(document.querySelectorAll(".listtag")).filter(e => e.offsetParent).map(e => {
			const t = e.querySelector(".tag"); return {name: e.id, tag: t ? t.dataset.tag : "", value: t ? t.textContent : ""}; })`, &lists)); err != nil {
			t.Fatal(err)
		}
		for _, l := range lists {
			if l.Tag != dashboard.TagMeasured && l.Tag != dashboard.TagConfigured && l.Tag != dashboard.TagUnavailable {
				t.Errorf("%s tab: table tag %s is %q (%q), want measured, configured or unavailable", tab, l.Name, l.Tag, l.Value)
			}
		}
	}
	checkTags("inference")
	var points string
	if err := chromedp.Run(ctx, chromedp.AttributeValue(`#chart-ttft`, "data-points", &points, nil)); err != nil {
		t.Fatal(err)
	}
	if points == "" || points == "0" {
		t.Errorf("TTFT chart: %q points, want at least one (three requests finished)", points)
	}

	// Store: the packs the store lists, once the page's request is
	// published and a poll that started after that is shown.
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	packs, err := s.Store().Packs()
	if err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := chromedp.Run(ctx,
		chromedp.Click(`#tab-store`),
		freshPoll(),
		shown(`#panel-store`, `#packs tbody tr`),
		chromedp.Evaluate(`document.querySelectorAll("#packs tbody tr").length`, &rows),
		shot("store"),
	); err != nil {
		t.Fatal(err)
	}
	if rows != len(packs) || rows == 0 {
		t.Errorf("Store tab: %d pack rows, want the store's %d", rows, len(packs))
	}
	checkTags("store")

	// Verify through the page (the admin endpoint) after damaging a
	// chunk of the most recently used pack: the report names it and
	// quarantines it; GC then removes it.
	damaged := packs[0]
	for _, p := range packs {
		if p.LastUse.After(damaged.LastUse) {
			damaged = p
		}
	}
	m, err := s.Store().Manifest(damaged.ID)
	if err != nil {
		t.Fatal(err)
	}
	h := m.ChunkIDs()[0].String()
	chunk := filepath.Join(s.Store().Dir(), "chunks", h[:2], h)
	data, err := os.ReadFile(chunk)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(chunk, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var verify struct {
		Packs       int           `json:"packs"`
		Errors      int           `json:"errors"`
		Quarantined []pack.Digest `json:"quarantined"`
	}
	status = adminClick(t, ctx, "#verify", "/admin/v1/verify", &verify)
	if status != "200" || verify.Packs != len(packs) || verify.Errors == 0 || len(verify.Quarantined) != 1 || verify.Quarantined[0] != damaged.ID {
		t.Errorf("Verify button: HTTP %s, %+v; want 200, %d packs checked, an error, %s quarantined", status, verify, len(packs), damaged.ID)
	}
	var quarantined string
	if err := chromedp.Run(ctx, chromedp.Click(`#tab-store`), freshPoll(), shot("store-verified"),
		chromedp.Evaluate(`document.querySelector('[data-figure="quarantined"]').dataset.value`, &quarantined)); err != nil {
		t.Fatal(err)
	}
	if quarantined != "1" {
		t.Errorf("Store tab after verify: quarantined %q, want 1", quarantined)
	}
	var gc struct {
		Removed []store.PackInfo `json:"removed"`
	}
	status = adminClick(t, ctx, "#gc", "/admin/v1/gc", &gc)
	if status != "200" || len(gc.Removed) != 1 || gc.Removed[0].ID != damaged.ID {
		t.Errorf("GC button (no budget): HTTP %s, removed %+v; want 200 and the quarantined %s", status, gc.Removed, damaged.ID)
	}
	var left []string
	if err := chromedp.Run(ctx, chromedp.Click(`#tab-store`), freshPoll(), shot("store-gc"),
		chromedp.Evaluate(`Array.from(document.querySelectorAll("#packs tbody tr")).map(r => r.dataset.pack)`, &left)); err != nil {
		t.Fatal(err)
	}
	if len(left) != len(packs)-1 || slices.Contains(left, damaged.ID.String()) {
		t.Errorf("Store tab after gc: packs %v, want the %d others, not %s", left, len(packs)-1, damaged.ID)
	}

	// Nodes: the cluster the hook reports.
	var peer string
	if err := chromedp.Run(ctx,
		chromedp.Click(`#tab-nodes`),
		shown(`#panel-nodes`, `[data-peer="beta"]`),
		chromedp.Evaluate(`document.querySelector('#panel-nodes [data-peer="beta"]').textContent`, &peer),
		shot("nodes"),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(peer, "moved 2/3 chunks") || !strings.Contains(peer, "127.0.0.1:7001") {
		t.Errorf("Nodes tab, peer beta: got %q, want its address and last push", peer)
	}
	checkTags("nodes")

	// Receipts: newest first.
	var ids []string
	if err := chromedp.Run(ctx,
		chromedp.Click(`#tab-receipts`),
		freshPoll(),
		shown(`#panel-receipts`, `#receipts tbody tr`),
		chromedp.Evaluate(`Array.from(document.querySelectorAll("#receipts tbody tr")).map(r => r.dataset.receipt)`, &ids),
		shot("receipts"),
	); err != nil {
		t.Fatal(err)
	}
	// Newest first: verify's refusal of the damaged pack, then the two
	// test receipts.
	verifyReceipts, err := s.Store().Receipts(store.ReceiptFilter{Pack: damaged.ID})
	if err != nil || len(verifyReceipts) != 1 || verifyReceipts[0].Source != store.SourceVerify {
		t.Fatalf("the store's receipts for the damaged pack: %+v, %v; want one from verify", verifyReceipts, err)
	}
	want3 := []string{verifyReceipts[0].ID, receipts[1].ID, receipts[0].ID}
	if !slices.Equal(ids, want3) {
		t.Errorf("Receipts tab: got %v, want %v (newest first)", ids, want3)
	}
	var reason string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.querySelector("#receipts tbody tr td:nth-child(2)").textContent`, &reason)); err != nil {
		t.Fatal(err)
	}
	if reason != string(verifyReceipts[0].Reason) {
		t.Errorf("Receipts tab: newest reason %q, want %q", reason, verifyReceipts[0].Reason)
	}
	checkTags("receipts")
	t.Logf("screenshots in %s", dir)
}

// TestBrowserKeys: on a server with API keys and an admin key, the page
// loads without a key, its state answers only once the admin key is
// given, and its chat request is made with the tenant key.
func TestBrowserKeys(t *testing.T) {
	browser := findBrowser(t)
	const tenantKey, adminKey = "browser-tenant-key-0001", "browser-admin-key-0001"
	dir := t.TempDir()
	keys, admin := filepath.Join(dir, "keys"), filepath.Join(dir, "admin.key")
	if err := os.WriteFile(keys, []byte(tenantKey+" alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(admin, []byte(adminKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, url := startServer(t, func(o *serve.Options) { o.APIKeysFile, o.AdminKeyFile = keys, admin })

	actx, cancelA := chromedp.NewExecAllocator(t.Context(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000))...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	var conn, status, reply string
	if err := chromedp.Run(ctx,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(`#conn[data-state="error"]`),
		chromedp.Text(`#conn`, &conn),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(conn, "401") {
		t.Errorf("state without the admin key: the page says %q, want a 401", conn)
	}
	// A chat without the tenant key is refused; with it, answered.
	if err := chromedp.Run(ctx,
		chromedp.SetValue(`#max-tokens`, "4"),
		chromedp.Click(`#send`),
		chromedp.WaitVisible(`#req-status[data-state="error"]`),
		chromedp.Text(`#req-status`, &status),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status, "401") {
		t.Errorf("chat without the tenant key: status %q, want a 401", status)
	}
	if err := chromedp.Run(ctx,
		chromedp.SetValue(`#admin-key`, adminKey),
		chromedp.SetValue(`#api-key`, tenantKey),
		chromedp.Click(`#send`),
		chromedp.WaitVisible(`#req-status[data-state="done"]`),
		chromedp.Text(`#reply`, &reply),
		chromedp.WaitVisible(`#conn[data-state="ok"]`),
	); err != nil {
		t.Fatal(err)
	}
	if reply == "" {
		t.Errorf("chat with the tenant key: empty reply")
	}
	// The admin key is not a tenant key, nor the tenant key an admin key.
	if err := chromedp.Run(ctx,
		chromedp.SetValue(`#admin-key`, tenantKey),
		chromedp.Click(`#tab-store`),
		chromedp.WaitVisible(`#conn[data-state="error"]`),
	); err != nil {
		t.Fatal(err)
	}
}
