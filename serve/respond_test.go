package serve

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A value JSON cannot hold is answered as a 500 with an error body that
// says so, not as the status asked for with an empty body.
func TestWriteJSONUnencodable(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want int
	}{
		{"encodable", map[string]any{"text": "<|im_end|>", "n": 1.5}, http.StatusOK},
		{"NaN", map[string]any{"logprob": math.NaN()}, http.StatusInternalServerError},
		{"infinity", []float64{1, math.Inf(-1)}, http.StatusInternalServerError},
		{"channel", map[string]any{"c": make(chan int)}, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeJSON(rec, http.StatusOK, tc.v)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d; body %q", rec.Code, tc.want, rec.Body.String())
			}
			if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("body is not JSON: %q", rec.Body.String())
			}
			if tc.want != http.StatusOK {
				var body map[string]any
				json.Unmarshal(rec.Body.Bytes(), &body)
				e, _ := body["error"].(map[string]any)
				if msg, _ := e["message"].(string); !strings.Contains(msg, "could not encode") {
					t.Fatalf("error body %q does not say what failed", rec.Body.String())
				}
			}
			if tc.want == http.StatusOK && !strings.Contains(rec.Body.String(), "<|im_end|>") {
				t.Fatalf("body %q escapes HTML characters", rec.Body.String())
			}
		})
	}
}
