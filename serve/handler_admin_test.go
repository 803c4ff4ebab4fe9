package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/serve/adminapi"
	"github.com/muserhq/muser/store"
)

// withPack starts a server and publishes one pack through a chat request.
func withPack(t *testing.T, mod func(*Options)) *testServer {
	t.Helper()
	ts := startServer(t, mod)
	ts.chat(t, chatBody(infertest.Story(0, 220), "Tell me a story.", 11, 4, nil), adminTestHeaders(ts)...)
	if err := ts.s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ts
}

func adminTestHeaders(ts *testServer) []string {
	if ts.s.keys != nil {
		return []string{"Authorization", "Bearer tenant-key-aaaaaaaaaaaa"}
	}
	return nil
}

// TestAdminEndpoint drives every admin route through adminapi.Client and
// compares with the store itself.
func TestAdminEndpoint(t *testing.T) {
	ts := withPack(t, nil)
	ctx := context.Background()
	c := &adminapi.Client{URL: ts.url}
	want, err := ts.s.Store().Packs()
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Packs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || len(got) != len(want) || got[0].ID != want[0].ID || got[0].Tokens != want[0].Tokens || got[0].Bytes != want[0].Bytes {
		t.Fatalf("GET /admin/v1/packs: got %+v, want %+v", got, want)
	}
	id := got[0].ID
	t.Run("inspect", func(t *testing.T) {
		in, err := c.Inspect(ctx, id.String()[:10])
		if err != nil {
			t.Fatal(err)
		}
		if in.Pack.ID != id || in.Manifest == nil || len(in.Manifest.Tokens) != got[0].Tokens {
			t.Fatalf("inspect: got pack %s with %d tokens, want %s with %d", in.Pack.ID, len(in.Manifest.Tokens), id, got[0].Tokens)
		}
		if k := in.Manifest.Identity.Pack().Key(); k != in.Pack.IdentityKey {
			t.Errorf("identity key: got %s, want %s", k, in.Pack.IdentityKey)
		}
	})
	t.Run("not found", func(t *testing.T) {
		_, err := c.Inspect(ctx, "ffffffffffff")
		var ae *adminapi.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("inspect of an unknown pack: got %v, want a 404 wrapping store.ErrNotFound", err)
		}
	})
	t.Run("bad prefix", func(t *testing.T) {
		_, err := c.Inspect(ctx, "xyz")
		var ae *adminapi.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code != adminapi.CodeInvalid {
			t.Fatalf("inspect of %q: got %v, want 400 invalid", "xyz", err)
		}
	})
	t.Run("verify", func(t *testing.T) {
		rep, err := c.Verify(ctx, adminapi.VerifyRequest{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Errors != 0 || rep.Packs != len(want) || rep.ChunksRead == 0 {
			t.Fatalf("verify: got %+v, want no errors, %d packs, chunks read", rep, len(want))
		}
		// Streamed: progress as it goes, then the same report.
		var calls, lastDone, lastTotal int
		streamed, err := c.Verify(ctx, adminapi.VerifyRequest{}, func(done, total int) { calls, lastDone, lastTotal = calls+1, done, total })
		if err != nil || streamed.Packs != rep.Packs || streamed.ChunksRead != rep.ChunksRead || streamed.Errors != 0 {
			t.Fatalf("streamed verify: got %+v, %v; want %+v", streamed, err, rep)
		}
		if calls == 0 || lastDone != lastTotal || lastTotal != rep.ChunksRead {
			t.Errorf("streamed verify: %d progress calls, last %d/%d; want the last at %d/%d", calls, lastDone, lastTotal, rep.ChunksRead, rep.ChunksRead)
		}
		if _, err := c.Verify(ctx, adminapi.VerifyRequest{Packs: []string{"ffffffff"}}, func(int, int) {}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("streamed verify of an unknown pack: got %v, want store.ErrNotFound", err)
		}
		rep, err = c.Verify(ctx, adminapi.VerifyRequest{Packs: []string{id.String()[:8]}, ReadDataSubset: "1/1"}, nil)
		if err != nil || rep.Packs != 1 {
			t.Fatalf("verify of one pack: got %+v, %v; want 1 pack", rep, err)
		}
		_, err = c.Verify(ctx, adminapi.VerifyRequest{ReadDataSubset: "3/2"}, nil)
		var ae *adminapi.Error
		if !errors.As(err, &ae) || ae.Code != adminapi.CodeInvalid || ae.Status != http.StatusBadRequest {
			t.Fatalf("verify with subset 3/2: got %v, want invalid", err)
		}
	})
	t.Run("pin", func(t *testing.T) {
		p, err := c.Pin(ctx, id.String(), true)
		if err != nil || !p.Pinned || p.Pack != id {
			t.Fatalf("pin: got %+v, %v", p, err)
		}
		if info, _ := ts.s.Store().Pack(id); !info.Pinned {
			t.Fatalf("after pin: store says pinned=false")
		}
		if _, err := c.Pin(ctx, id.String(), false); err != nil {
			t.Fatal(err)
		}
		if info, _ := ts.s.Store().Pack(id); info.Pinned {
			t.Fatalf("after unpin: store says pinned=true")
		}
	})
	t.Run("receipts", func(t *testing.T) {
		rs, err := c.Receipts(ctx, adminapi.ReceiptQuery{})
		if err != nil || rs == nil || len(rs) != 0 {
			t.Fatalf("receipts: got %v, %v; want an empty list", rs, err)
		}
		resp, body := ts.do(t, "GET", "/admin/v1/receipts", "")
		if resp.StatusCode != 200 || string(body) != "[]\n" {
			t.Fatalf("GET /admin/v1/receipts: got %d %q, want 200 []", resp.StatusCode, body)
		}
		_, err = c.Receipt(ctx, "0123")
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("receipt 0123: got %v, want not found", err)
		}
	})
	t.Run("bad gc body", func(t *testing.T) {
		for _, body := range []string{`{"max_bites":1}`, `{"max_bytes":-1}`, `{"grace":"soon"}`, `{"max_bytes":"1"}`, `[`} {
			resp, b := ts.post(t, "/admin/v1/gc", body)
			var e struct {
				Error adminapi.Error `json:"error"`
			}
			if resp.StatusCode != 400 || json.Unmarshal(b, &e) != nil || e.Error.Code != adminapi.CodeInvalid {
				t.Errorf("POST /admin/v1/gc %s: got %d %s, want 400 invalid", body, resp.StatusCode, b)
			}
		}
	})
	t.Run("gc", func(t *testing.T) {
		zero := int64(0)
		rep, err := c.GC(ctx, adminapi.GCRequest{MaxBytes: &zero, DryRun: true})
		if err != nil || len(rep.Removed) != len(want) || !rep.DryRun {
			t.Fatalf("gc dry run: got %+v, %v; want %d packs", rep, err, len(want))
		}
		if ps, _ := ts.s.Store().Packs(); len(ps) != len(want) {
			t.Fatalf("after a dry run: %d packs, want %d", len(ps), len(want))
		}
		rep, err = c.GC(ctx, adminapi.GCRequest{MaxBytes: &zero, Grace: "0s"})
		if err != nil || len(rep.Removed) != len(want) || rep.After != 0 {
			t.Fatalf("gc: got %+v, %v; want %d packs removed, 0 bytes after", rep, err, len(want))
		}
		if ps, _ := c.Packs(ctx); len(ps) != 0 {
			t.Fatalf("after gc: %d packs, want 0", len(ps))
		}
		_, m := ts.do(t, http.MethodGet, "/metrics", "")
		st, err := ts.s.Store().Stats()
		if err != nil {
			t.Fatal(err)
		}
		if got := opsMetric(t, string(m), "muser_store_bytes", ""); got != float64(st.Bytes) || got >= float64(rep.Before) {
			t.Errorf("after gc: muser_store_bytes %v, want the store's %d (it held %d before)", got, st.Bytes, rep.Before)
		}
	})
}

// TestAdminAccess checks who may use the admin endpoint.
func TestAdminAccess(t *testing.T) {
	t.Run("loopback without key", func(t *testing.T) {
		ts := startServer(t, nil)
		for _, tc := range []struct {
			name   string
			header []string
			want   int
		}{
			{"plain", nil, 200},
			{"same origin", []string{"Origin", ts.url}, 200},
			{"other origin", []string{"Origin", "http://evil.example"}, 401},
			{"forwarded", []string{"X-Forwarded-For", "203.0.113.9"}, 401},
			{"forwarded rfc 7239", []string{"Forwarded", "for=203.0.113.9"}, 401},
			{"rebound host name", []string{"Host", "evil.example:4949"}, 401},
			{"localhost", []string{"Host", "localhost:4949"}, 200},
		} {
			resp, body := ts.do(t, "GET", "/admin/v1/packs", "", tc.header...)
			if resp.StatusCode != tc.want {
				t.Errorf("%s: got %d %s, want %d", tc.name, resp.StatusCode, body, tc.want)
			}
		}
	})
	t.Run("admin key", func(t *testing.T) {
		keyFile := filepath.Join(t.TempDir(), "admin.key")
		if err := os.WriteFile(keyFile, []byte("admin-secret-0123456789\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		ts := startServer(t, func(o *Options) {
			o.AdminKeyFile = keyFile
			o.APIKeysFile = writeKeys(t, "tenant-key-aaaaaaaaaaaa alice")
		})
		for _, tc := range []struct {
			name string
			key  string
			want int
		}{
			{"no key", "", 401},
			{"tenant key", "tenant-key-aaaaaaaaaaaa", 401},
			{"wrong key", "admin-secret-012345678", 401},
			{"admin key", "admin-secret-0123456789", 200},
		} {
			var h []string
			if tc.key != "" {
				h = []string{"Authorization", "Bearer " + tc.key}
			}
			resp, body := ts.do(t, "POST", "/admin/v1/verify", "", h...)
			if resp.StatusCode != tc.want {
				t.Errorf("%s: got %d %s, want %d", tc.name, resp.StatusCode, body, tc.want)
			}
		}
		// The admin key is no tenant key either.
		resp, _ := ts.do(t, "GET", "/v1/models", "", "Authorization", "Bearer admin-secret-0123456789")
		if resp.StatusCode != 401 {
			t.Errorf("GET /v1/models with the admin key: got %d, want 401", resp.StatusCode)
		}
	})
	t.Run("body over --max-body", func(t *testing.T) {
		ts := startServer(t, func(o *Options) { o.MaxBodyBytes = 64 })
		body := `{"packs":["` + strings.Repeat("a", 100) + `"]}`
		resp, out := ts.do(t, "POST", "/admin/v1/remove", body)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(out), "larger than 64 bytes") {
			t.Errorf("admin body of %d bytes over a 64-byte limit: got %d %s, want 413 naming the limit", len(body), resp.StatusCode, out)
		}
	})
	t.Run("short key", func(t *testing.T) {
		keyFile := filepath.Join(t.TempDir(), "admin.key")
		os.WriteFile(keyFile, []byte("short"), 0o600)
		_, err := New(Options{ModelPath: modelPath, Home: t.TempDir(), AdminKeyFile: keyFile})
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != "--admin-key-file" {
			t.Fatalf("New with a 5-byte admin key: got %v, want an OptionError naming --admin-key-file", err)
		}
	})
}
