package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/infertest"
)

// slotKV returns the lkv1 bytes of slot id's first n tokens.
func slotKV(t *testing.T, s *Server, id, n int) []byte {
	t.Helper()
	var out []byte
	err := s.sched.WithSlot(context.Background(), id, func(ctx context.Context, seq *engine.Sequence, old []byte) []byte {
		if seq.Len() < n {
			t.Errorf("slot %d holds %d tokens, want at least %d", id, seq.Len(), n)
			return old
		}
		b, err := seq.ExportBlock(0, n)
		if err != nil {
			t.Error(err)
		}
		out = b
		return old
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSlotSaveRestoreErase(t *testing.T) {
	ts := startServer(t, nil)
	prompt := infertest.Story(0, 150)
	var c struct {
		TokensEvaluated int `json:"tokens_evaluated"`
		Predicted       int `json:"tokens_predicted"`
	}
	ts.postJSON(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 4, "temperature": 0}, &c)
	held := c.TokensEvaluated + c.Predicted - 1 // the last sampled token is not fed back
	b := ts.s.store.BlockTokens()
	want := held / b * b
	if want < b {
		t.Fatalf("the prompt is too short for a block: %d tokens", held)
	}
	kv := slotKV(t, ts.s, 0, want)

	var saved struct {
		ID       int    `json:"id_slot"`
		Filename string `json:"filename"`
		NSaved   int    `json:"n_saved"`
		NWritten int64  `json:"n_written"`
		Timings  struct {
			SaveMS *float64 `json:"save_ms"`
		} `json:"timings"`
	}
	ts.postJSON(t, "/slots/0?action=save", map[string]any{"filename": "story.bin"}, &saved)
	path := filepath.Join(ts.home, "slots", "local", "story.bin")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if saved.ID != 0 || saved.Filename != "story.bin" || saved.NSaved != want || saved.NWritten != fi.Size() || saved.Timings.SaveMS == nil {
		t.Fatalf("save: got %+v, want slot 0, story.bin, %d tokens, %d bytes written, timings", saved, want, fi.Size())
	}

	var erased struct {
		NErased int `json:"n_erased"`
	}
	ts.postJSON(t, "/slots/0?action=erase", nil, &erased)
	if erased.NErased != held {
		t.Fatalf("erase: got %d tokens erased, want %d", erased.NErased, held)
	}
	if in := ts.s.sched.SlotInfos()[0]; in.Tokens != 0 {
		t.Fatalf("after erase the slot holds %d tokens", in.Tokens)
	}

	var restored struct {
		NRestored int   `json:"n_restored"`
		NRead     int64 `json:"n_read"`
	}
	ts.postJSON(t, "/slots/0?action=restore", map[string]any{"filename": "story.bin"}, &restored)
	if restored.NRestored != want || restored.NRead != fi.Size() {
		t.Fatalf("restore: got %+v, want %d tokens, %d bytes", restored, want, fi.Size())
	}
	if got := slotKV(t, ts.s, 0, want); !bytes.Equal(got, kv) {
		t.Fatalf("restored KV differs from the saved slot's (%d and %d bytes)", len(got), len(kv))
	}
	// Again (the store holds the pack), and after the pack left the
	// store (the file is imported).
	ts.postJSON(t, "/slots/0?action=restore", map[string]any{"filename": "story.bin"}, &restored)
	if restored.NRestored != want {
		t.Fatalf("second restore: got %d tokens, want %d", restored.NRestored, want)
	}
	packs, err := ts.s.store.Packs()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range packs {
		if _, err := ts.s.store.Remove(p.ID); err != nil {
			t.Fatal(err)
		}
	}
	ts.postJSON(t, "/slots/0?action=erase", nil, &erased)
	ts.postJSON(t, "/slots/0?action=restore", map[string]any{"filename": "story.bin"}, &restored)
	if got := slotKV(t, ts.s, 0, want); restored.NRestored != want || !bytes.Equal(got, kv) {
		t.Fatalf("restore by import: got %d tokens (want %d), same KV %v", restored.NRestored, want, bytes.Equal(got, kv))
	}

	// A damaged file is refused, and the slot is left empty.
	data, _ := os.ReadFile(path)
	data[len(data)/2] ^= 0x40
	os.WriteFile(filepath.Join(ts.home, "slots", "local", "bad.bin"), data, 0o600)
	resp, body := ts.post(t, "/slots/0?action=restore", `{"filename": "bad.bin"}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "refused") {
		t.Fatalf("damaged file: got %d %s, want 400 refused", resp.StatusCode, body)
	}

	for _, tc := range []struct {
		path, body string
		status     int
		param      string
	}{
		{"/slots/0?action=save", `{"filename": "../escape"}`, 400, "filename"},
		{"/slots/0?action=save", `{"filename": "a/b"}`, 400, "filename"},
		{"/slots/0?action=save", `{"filename": "a\\b"}`, 400, "filename"},
		{"/slots/0?action=save", `{"filename": ".hidden"}`, 400, "filename"},
		{"/slots/0?action=save", `{"filename": ".."}`, 400, "filename"},
		{"/slots/0?action=save", `{"filename": ""}`, 400, "filename"},
		{"/slots/0?action=save", `{"filename": "` + strings.Repeat("x", 300) + `"}`, 400, "filename"},
		{"/slots/0?action=save", `{}`, 400, "filename"},
		{"/slots/0?action=save", `{"file": "x"}`, 400, "file"},
		{"/slots/0?action=restore", `{"filename": "absent.bin"}`, 404, "absent.bin"},
		{"/slots/0?action=load", `{"filename": "x"}`, 400, "action"},
		{"/slots/7?action=erase", ``, 400, "slot"},
		{"/slots/x?action=erase", ``, 400, "slot"},
	} {
		resp, body := ts.post(t, tc.path, tc.body)
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.param) {
			t.Errorf("%s %s: got %d %s, want %d naming %q", tc.path, tc.body[:min(len(tc.body), 40)], resp.StatusCode, body, tc.status, tc.param)
		}
	}
	if _, err := os.Stat(filepath.Join(ts.home, "escape")); err == nil {
		t.Fatal("a slot file escaped the slots directory")
	}
}

func TestSlotFilesAreTenants(t *testing.T) {
	keys := writeKeys(t, "sk-aaaaaaaaaaaaaaaaaaaa alice", "sk-bbbbbbbbbbbbbbbbbbbb bob")
	ts := startServer(t, func(o *Options) { o.APIKeysFile = keys })
	alice := []string{"Authorization", "Bearer sk-aaaaaaaaaaaaaaaaaaaa"}
	bob := []string{"Authorization", "Bearer sk-bbbbbbbbbbbbbbbbbbbb"}
	var c map[string]any
	ts.postJSON(t, "/completion", map[string]any{"prompt": infertest.Story(1, 150), "n_predict": 2}, &c, alice...)
	var saved map[string]any
	ts.postJSON(t, "/slots/0?action=save", map[string]any{"filename": "a.bin"}, &saved, alice...)
	// Bob cannot save, erase or restore Alice's KV.
	for _, q := range []struct{ path, body string }{
		{"/slots/0?action=save", `{"filename": "b.bin"}`},
		{"/slots/0?action=erase", ``},
		{"/slots/0?action=restore", `{"filename": "a.bin"}`}, // not in bob's directory
	} {
		resp, body := ts.post(t, q.path, q.body, bob...)
		if resp.StatusCode == http.StatusOK {
			t.Errorf("bob %s: got 200 %s, want a refusal", q.path, body)
		}
	}
	// Alice's file copied into Bob's directory still restores nothing for him.
	data, err := os.ReadFile(filepath.Join(ts.home, "slots", "alice", "a.bin"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(ts.home, "slots", "bob"), 0o700)
	os.WriteFile(filepath.Join(ts.home, "slots", "bob", "a.bin"), data, 0o600)
	resp, body := ts.post(t, "/slots/0?action=restore", `{"filename": "a.bin"}`, bob...)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "no KV of this tenant") {
		t.Fatalf("bob restoring alice's file: got %d %s, want 400 no KV of this tenant", resp.StatusCode, body)
	}
	var infos []map[string]any
	_, b := ts.do(t, http.MethodGet, "/slots", "", alice...)
	json.Unmarshal(b, &infos)
	if len(infos) == 0 || infos[0]["n_tokens"].(float64) == 0 {
		t.Fatalf("bob's refused restore emptied alice's slot: %s", b)
	}
}

// FuzzSlotFilename checks that every accepted slot file name names a
// file directly inside the slots directory.
func FuzzSlotFilename(f *testing.F) {
	for _, s := range []string{"a.bin", "../x", "..", ".", "a/b", `a\b`, "", "x\x00y", "ok name.bin", "é.bin"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if checkSlotFilename(name) != nil {
			return
		}
		dir := filepath.Join("home", "slots", "t")
		p := filepath.Join(dir, name)
		if filepath.Dir(p) != dir || filepath.Base(p) != name || strings.HasPrefix(name, ".") {
			t.Fatalf("accepted %q, which names %q outside %q", name, p, dir)
		}
	})
}
