//go:build unix

package serve

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/store"
)

// TestRestoreFIFO: a named pipe in place of a chunk file of a cached
// prefix makes the restore a refusal with a receipt; the request is
// answered by a local prefill with the output it has without a cache,
// and the server still stops.
func TestRestoreFIFO(t *testing.T) {
	ts := startServer(t, nil)
	body := chatBody(infertest.Story(0, 220), "Tell me a story.", 11, 8, nil)
	cold := ts.chat(t, body)
	if err := ts.s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := ts.s.Store()
	packs, err := st.Packs()
	if err != nil || len(packs) == 0 {
		t.Fatalf("after the first request: %d packs, %v; want one", len(packs), err)
	}
	for _, p := range packs {
		m, err := st.Manifest(p.ID)
		if err != nil {
			t.Fatal(err)
		}
		h := m.Chunks[0].ID.String()
		path := filepath.Join(ts.home, "chunks", h[:2], h)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	warm := ts.chat(t, body)
	if warm.cached != 0 {
		t.Errorf("with a FIFO in the cached pack: %d cached tokens, want 0 (a refusal)", warm.cached)
	}
	if warm.content != cold.content || warm.finish != cold.finish {
		t.Errorf("after the refusal: %q (%s), want %q (%s) as without a cache", warm.content, warm.finish, cold.content, cold.finish)
	}
	rs, err := st.Receipts(store.ReceiptFilter{})
	if err != nil || len(rs) == 0 {
		t.Fatalf("receipts: %v, %v; want the restore's refusal", rs, err)
	}
	ts.stop(t)
}
