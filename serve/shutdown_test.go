package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/muserhq/muser/store"
)

// TestShutdownFinishesInFlight: a shutdown lets every request the server
// had begun to read finish, a body still arriving included (not 503),
// and lets an open stream run to its end; it refuses new connections, and
// publishes what the requests computed before the store closes.
func TestShutdownFinishesInFlight(t *testing.T) {
	ts := startServer(t, nil)
	addr := strings.TrimPrefix(ts.url, "http://")
	prompt := strings.Repeat("Once upon a time there was a little girl named Lily. ", 8) // > 1 block of 64 tokens
	cases := []struct {
		name string
		body map[string]any
	}{
		{"body arriving", map[string]any{"prompt": prompt, "max_tokens": 4, "seed": 1}},
		{"body arriving, stream", map[string]any{"prompt": prompt + "One day", "max_tokens": 4, "seed": 1, "stream": true}},
	}
	// Each request sends its headers and part of its body before the
	// shutdown, the rest after it.
	conns := make([]net.Conn, len(cases))
	bodies := make([]string, len(cases))
	for i, c := range cases {
		b, _ := json.Marshal(c.body)
		bodies[i] = string(b)
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			addr, len(b), b[:10])
		conns[i] = conn
	}
	// A stream that is already generating.
	sb, _ := json.Marshal(map[string]any{"prompt": "Once", "stream": true, "max_tokens": 200, "seed": 1, "logit_bias": eogBias(ts)})
	stream, err := http.Post(ts.url+"/v1/completions", "application/json", strings.NewReader(string(sb)))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	rd := bufio.NewReader(stream.Body)
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatal(err)
	}

	cancel := ts.cancel
	ts.cancel = nil
	cancel()
	// The shutdown has begun once the server refuses new connections.
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		c.Close()
	}

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := io.WriteString(conns[i], bodies[i][10:]); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conns[i]), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("got %d %s, want 200: the request was in flight when the shutdown began", resp.StatusCode, bytes.TrimSpace(body))
			}
			if c.body["stream"] == true {
				if evs := sseEvents(body); len(evs) == 0 || evs[len(evs)-1] != "[DONE]" {
					t.Errorf("stream does not end with [DONE]: %q", evs)
				}
			}
		})
	}
	rest, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("reading the open stream: %v", err)
	}
	if evs := sseEvents(rest); len(evs) == 0 || evs[len(evs)-1] != "[DONE]" {
		t.Errorf("the open stream does not end with [DONE]: %d events", len(evs))
	}
	if err := <-ts.done; err != nil {
		t.Fatalf("Serve returned %v, want nil after a shutdown", err)
	}
	st, err := store.Open(ts.home, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stats, err := st.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if stats.Packs == 0 {
		t.Errorf("the store holds no pack after the shutdown; want the requests' blocks published")
	}
}
