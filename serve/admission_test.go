package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestSequentialClientNotRefused: with no queue (--max-queue 0) and one
// slot, a client that sends its requests one after the other is never
// refused: the slot that served the last request, still copying out its
// blocks for the store, is not busy.
func TestSequentialClientNotRefused(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.MaxQueue = -1 })
	for i := range 50 {
		// A new prompt of more than one block each time, so each request
		// publishes.
		p := strings.Repeat(fmt.Sprintf("Once upon a time, %d, there was a girl. ", i), 12)
		b, _ := json.Marshal(map[string]any{"prompt": p, "n_predict": 2})
		resp, body := ts.post(t, "/completion", string(b))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d, sent after the one before was answered: got %d %s, want 200", i, resp.StatusCode, bytes.TrimSpace(body))
		}
	}
}
