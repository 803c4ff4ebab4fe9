package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestOllamaGenerateContext checks that /api/generate's context is the
// prompt and the generated tokens of the response the client was shown:
// a stop string cut from the response is not in it, so a client that
// sends the context back continues from what it saw. Greedy on
// stories260K, "Once upon a time" continues ", there was a little girl",
// whose last word is the tokens " g" "ir" "l".
func TestOllamaGenerateContext(t *testing.T) {
	ts := startServer(t, nil)
	for _, tc := range []struct {
		name     string
		stop     []string
		stream   bool
		response string // the text the client is shown
		context  string // the text of the context's generated tokens
	}{
		{"no stop", nil, false, ", there was a little girl", ", there was a little girl"},
		{"stop at a token boundary", []string{"ir"}, false, ", there was a little g", ", there was a little g"},
		{"stop inside a token", []string{"girl"}, false, ", there was a little ", ", there was a little"},
		{"stop inside a token, streamed", []string{"girl"}, true, ", there was a little ", ", there was a little"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"model": "stories260K", "prompt": "Once upon a time", "raw": true,
				"stream": tc.stream, "options": map[string]any{"num_predict": 8, "temperature": 0, "stop": tc.stop}})
			resp, raw := ts.post(t, "/api/generate", string(body))
			if resp.StatusCode != 200 {
				t.Fatalf("got %d %s", resp.StatusCode, raw)
			}
			var text strings.Builder
			var last struct {
				Response        string  `json:"response"`
				Context         []int32 `json:"context"`
				PromptEvalCount int     `json:"prompt_eval_count"`
				Done            bool    `json:"done"`
			}
			sc := bufio.NewScanner(bytes.NewReader(raw))
			for sc.Scan() {
				last.Response = ""
				if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
					t.Fatalf("%v in %s", err, sc.Text())
				}
				text.WriteString(last.Response)
			}
			if !last.Done {
				t.Fatalf("the last object is not done: %s", raw)
			}
			if text.String() != tc.response {
				t.Fatalf("response %q, want %q", text.String(), tc.response)
			}
			if len(last.Context) < last.PromptEvalCount {
				t.Fatalf("context holds %d tokens, fewer than the %d of the prompt", len(last.Context), last.PromptEvalCount)
			}
			got := piecesText(t, ts, last.Context[last.PromptEvalCount:])
			if got != tc.context {
				t.Errorf("the context's generated tokens read %q, want %q (the response is %q)", got, tc.context, tc.response)
			}
		})
	}
}

// piecesText is the text of ids as the scheduler streams it.
func piecesText(t *testing.T, ts *testServer, ids []int32) string {
	t.Helper()
	var b strings.Builder
	for _, id := range ids {
		p, err := ts.s.model.tok.Piece(id, false)
		if err != nil {
			t.Fatal(fmt.Errorf("token %d: %w", id, err))
		}
		b.WriteString(p)
	}
	return b.String()
}
