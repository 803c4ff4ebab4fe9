package serve

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestResponseIDsUnique: a stored response's ID is the server's own: two
// requests that send the same X-Request-Id (a retry that keeps its ID, or
// a client that copies another's from /slots) store two responses, and
// neither overwrites the other, so previous_response_id continues the
// conversation it names.
func TestResponseIDsUnique(t *testing.T) {
	ts := startServer(t, nil)
	inputs := []string{"Once upon a time", "Lily went to the park"}
	cases := []struct {
		name  string
		reqID string
	}{
		{"same X-Request-Id", "retry-1"},
		{"no X-Request-Id", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var hdr []string
			if c.reqID != "" {
				hdr = []string{"X-Request-Id", c.reqID}
			}
			var ids []string
			bodies := map[string]string{}
			for i, in := range inputs {
				b, _ := json.Marshal(map[string]any{"input": in, "max_output_tokens": 3, "seed": i})
				resp, raw := ts.post(t, "/v1/responses", string(b), hdr...)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("POST %q: got %d %s", in, resp.StatusCode, raw)
				}
				var r struct{ ID string }
				if err := json.Unmarshal(raw, &r); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, r.ID)
				bodies[r.ID] = string(raw)
			}
			if ids[0] == ids[1] {
				t.Fatalf("both responses have ID %q; want two IDs", ids[0])
			}
			for _, id := range ids {
				resp, raw := ts.do(t, "GET", "/v1/responses/"+id, "")
				var got, want any
				json.Unmarshal(raw, &got)
				json.Unmarshal([]byte(bodies[id]), &want)
				if resp.StatusCode != http.StatusOK || !jsonEqual(got, want) {
					t.Errorf("GET %s: got %d %s, want the response stored under it: %s", id, resp.StatusCode, raw, bodies[id])
				}
			}
		})
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
