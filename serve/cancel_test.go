package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// routeCodes returns the codes muser_requests_total counts for route.
func routeCodes(t *testing.T, ts *testServer, route string) map[string]string {
	t.Helper()
	_, m := ts.do(t, "GET", "/metrics", "")
	re := regexp.MustCompile(`(?m)^muser_requests_total\{code="(\d+)",route="` + regexp.QuoteMeta(route) + `"\} (\S+)$`)
	out := map[string]string{}
	for _, x := range re.FindAllStringSubmatch(string(m), -1) {
		out[x[1]] = x[2]
	}
	return out
}

// TestClientGoneCounted: a client that goes away while its request waits
// for a slot got no answer: /metrics counts it under code 499 (client
// closed request), never as a success (200) or a server error (500), and
// the queue and busy gauges come back to 0.
func TestClientGoneCounted(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.Pooling = "mean" })
	cases := []struct {
		route, path, body string
	}{
		{"POST /v1/chat/completions", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`},
		{"POST /v1/completions", "/v1/completions", `{"prompt":"Once","max_tokens":2}`},
		{"POST /api/generate", "/api/generate", `{"model":"stories260K","prompt":"Once","stream":false}`},
		{"POST /v1/embeddings", "/v1/embeddings", `{"input":["Once upon a time","Lily"]}`},
		{"POST /api/embed", "/api/embed", `{"model":"stories260K","input":"Once upon a time"}`},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			// A stream holds the only slot until the client closes it.
			hb, _ := json.Marshal(map[string]any{"prompt": "Once", "stream": true, "n_predict": 450, "seed": 1, "logit_bias": eogBias(ts)})
			hold, err := http.Post(ts.url+"/completion", "application/json", strings.NewReader(string(hb)))
			if err != nil {
				t.Fatal(err)
			}
			defer hold.Body.Close()
			if _, err := bufio.NewReader(hold.Body).ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+c.path, strings.NewReader(c.body))
			errc := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				errc <- err
			}()
			for ts.s.sched.QueueDepth() == 0 {
			}
			cancel()
			<-errc
			for len(routeCodes(t, ts, c.route)) == 0 {
			}
			codes := routeCodes(t, ts, c.route)
			if len(codes) != 1 || codes["499"] != "1" {
				t.Errorf("muser_requests_total for %s: got codes %v, want only 499 once", c.route, codes)
			}
			hold.Body.Close()
			for {
				_, m := ts.do(t, "GET", "/metrics", "")
				if metricValue(t, m, "muser_slots_busy") == 0 && metricValue(t, m, "muser_queue_depth") == 0 {
					break
				}
			}
		})
	}
}
