package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

const goldenPath = "../../shared/models/golden/stories260K.llama2c-test_all.expected.txt"

// TestGreedyGolden: greedy decoding over HTTP, on every route family,
// gives llama2c's expected text for "Once upon a time".
func TestGreedyGolden(t *testing.T) {
	golden, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	ts := startServer(t, nil)
	const n = 40
	var llama struct {
		Content        string `json:"content"`
		TokensPred     int    `json:"tokens_predicted"`
		TokensEval     int    `json:"tokens_evaluated"`
		StopType       string `json:"stop_type"`
		Timings        map[string]float64
		GenerationSets map[string]any `json:"generation_settings"`
	}
	ts.postJSON(t, "/completion", map[string]any{"prompt": "Once upon a time", "n_predict": n, "temperature": 0}, &llama)
	want := string(golden)
	if got := "Once upon a time" + llama.Content; !strings.HasPrefix(want, got) {
		t.Errorf("/completion: got %q, want a prefix of %q", got, want[:len(got)])
	}
	if llama.TokensPred != n || llama.TokensEval != 5 || llama.StopType != "limit" {
		t.Errorf("/completion: predicted %d evaluated %d stop %q, want %d 5 limit", llama.TokensPred, llama.TokensEval, llama.StopType, n)
	}
	// Token ids as the prompt give the same.
	var byIDs struct{ Content string }
	ts.postJSON(t, "/completion", map[string]any{"prompt": []int{1, 403, 407, 261, 378}, "n_predict": n, "temperature": 0}, &byIDs)
	if byIDs.Content != llama.Content {
		t.Errorf("prompt as token ids: got %q, want %q", byIDs.Content, llama.Content)
	}
	var oa struct {
		Choices []struct{ Text string } `json:"choices"`
	}
	ts.postJSON(t, "/v1/completions", map[string]any{"prompt": "Once upon a time", "max_tokens": n, "temperature": 0}, &oa)
	if len(oa.Choices) != 1 || oa.Choices[0].Text != llama.Content {
		t.Errorf("/v1/completions: got %+v, want %q", oa.Choices, llama.Content)
	}
	var ol struct{ Response string }
	ts.postJSON(t, "/api/generate", map[string]any{"model": "stories260K", "prompt": "Once upon a time", "raw": true, "stream": false,
		"options": map[string]any{"num_predict": n, "temperature": 0, "repeat_penalty": 1}}, &ol)
	if ol.Response != llama.Content {
		t.Errorf("/api/generate raw: got %q, want %q", ol.Response, llama.Content)
	}
}

func TestLlamaRoutes(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.Parallel = 2 })
	// Streaming gives the non-streamed text, event by event.
	body := map[string]any{"prompt": "Once upon a time", "n_predict": 12, "temperature": 0.7, "seed": 9, "n_probs": 2, "return_tokens": true}
	var whole struct {
		Content string `json:"content"`
		Tokens  []int  `json:"tokens"`
		Probs   []struct {
			ID  int `json:"id"`
			Top []struct {
				Token string `json:"token"`
			} `json:"top_logprobs"`
		} `json:"completion_probabilities"`
		IDSlot       int `json:"id_slot"`
		TokensCached int `json:"tokens_cached"`
	}
	ts.postJSON(t, "/completion", body, &whole)
	if len(whole.Tokens) != 12 || len(whole.Probs) != 12 {
		t.Fatalf("got %d tokens and %d probabilities, want 12 and 12", len(whole.Tokens), len(whole.Probs))
	}
	for i, p := range whole.Probs {
		if p.ID != whole.Tokens[i] || len(p.Top) != 2 {
			t.Errorf("probability %d: id %d with %d top, want id %d with 2", i, p.ID, len(p.Top), whole.Tokens[i])
		}
	}
	body["stream"] = true
	b, _ := json.Marshal(body)
	resp, raw := ts.post(t, "/completion", string(b))
	if resp.StatusCode != 200 {
		t.Fatalf("got %d %s", resp.StatusCode, raw)
	}
	evs := sseEvents(raw)
	var text strings.Builder
	idSlots := make([]int, len(evs))
	for i, ev := range evs {
		var e struct {
			Content string `json:"content"`
			Stop    bool   `json:"stop"`
			IDSlot  int    `json:"id_slot"`
		}
		if err := json.Unmarshal([]byte(ev), &e); err != nil {
			t.Fatalf("event %d: %v in %s", i, err, ev)
		}
		text.WriteString(e.Content)
		idSlots[i] = e.IDSlot
		if e.Stop != (i == len(evs)-1) {
			t.Errorf("event %d of %d has stop %v", i, len(evs), e.Stop)
		}
	}
	// Every chunk names the slot that generates it, the final one too.
	for i, slot := range idSlots {
		if last := idSlots[len(idSlots)-1]; slot != last || slot < 0 {
			t.Errorf("event %d of %d has id_slot %d, the final event %d", i, len(evs), slot, last)
		}
	}
	if text.String() != whole.Content {
		t.Errorf("streamed %q, whole %q", text.String(), whole.Content)
	}
	// A stop word ends generation before it.
	cut := whole.Content[3:6]
	var stopped struct {
		Content      string `json:"content"`
		StopType     string `json:"stop_type"`
		StoppingWord string `json:"stopping_word"`
	}
	delete(body, "stream")
	body["stop"] = []string{cut}
	ts.postJSON(t, "/completion", body, &stopped)
	if stopped.StopType != "word" || stopped.StoppingWord != cut || stopped.Content != whole.Content[:strings.Index(whole.Content, cut)] {
		t.Errorf("stop %q: got %+v", cut, stopped)
	}
	// Tokenize and detokenize.
	var tok struct{ Tokens []int }
	ts.postJSON(t, "/tokenize", map[string]any{"content": "Once upon a time", "add_special": true}, &tok)
	if want := []int{1, 403, 407, 261, 378}; !equalInts(tok.Tokens, want) {
		t.Errorf("/tokenize: got %v, want %v", tok.Tokens, want)
	}
	var pieces struct {
		Tokens []struct {
			ID    int    `json:"id"`
			Piece string `json:"piece"`
		}
	}
	ts.postJSON(t, "/tokenize", map[string]any{"content": "Once upon", "with_pieces": true}, &pieces)
	if len(pieces.Tokens) != 2 || pieces.Tokens[0].Piece != " Once" {
		t.Errorf("/tokenize with_pieces: got %+v", pieces.Tokens)
	}
	// /detokenize concatenates the pieces as llama.cpp's server does: the
	// leading space stays and BOS renders as its text.
	for _, c := range []struct {
		tokens []int
		want   string
	}{
		{[]int{403, 407, 261, 378}, " Once upon a time"},
		{[]int{1, 403, 407}, "<s> Once upon"},
		{[]int{}, ""},
	} {
		var detok struct{ Content string }
		ts.postJSON(t, "/detokenize", map[string]any{"tokens": c.tokens}, &detok)
		if detok.Content != c.want {
			t.Errorf("/detokenize %v: got %q, want %q", c.tokens, detok.Content, c.want)
		}
	}
	// Props, health, slots.
	var props struct {
		Slots    int `json:"total_slots"`
		Defaults struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
		Template string `json:"chat_template"`
	}
	_, pb := ts.do(t, "GET", "/props", "")
	json.Unmarshal(pb, &props)
	if props.Slots != 2 || props.Defaults.NCtx != 512 || !strings.Contains(props.Template, "im_start") {
		t.Errorf("/props: got %s", pb)
	}
	_, hb := ts.do(t, "GET", "/health", "")
	if !bytes.Contains(hb, []byte(`"status":"ok"`)) {
		t.Errorf("/health: got %s", hb)
	}
	var slots []map[string]any
	_, sb := ts.do(t, "GET", "/slots", "")
	if err := json.Unmarshal(sb, &slots); err != nil || len(slots) != 2 {
		t.Errorf("/slots: got %s", sb)
	}
}

func TestOllamaRoutes(t *testing.T) {
	ts := startServer(t, nil)
	// Streamed NDJSON.
	resp, raw := ts.post(t, "/api/generate", `{"model":"stories260K:latest","prompt":"Tell me a story","options":{"num_predict":6,"seed":4}}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("got %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	var lines []map[string]any
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%v in %s", err, sc.Text())
		}
		lines = append(lines, m)
	}
	last := lines[len(lines)-1]
	if last["done"] != true || last["eval_count"] != float64(6) || last["done_reason"] != "length" {
		t.Errorf("last line %v", last)
	}
	for _, k := range []string{"total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_duration", "context", "created_at"} {
		if _, ok := last[k]; !ok {
			t.Errorf("last line lacks %s", k)
		}
	}
	// Chat, not streamed.
	var chat struct {
		Message struct{ Role, Content string }
		Done    bool
	}
	ts.postJSON(t, "/api/chat", map[string]any{"model": "stories260K", "stream": false,
		"messages": []any{map[string]any{"role": "user", "content": "Hi"}}, "options": map[string]any{"num_predict": 4}}, &chat)
	if !chat.Done || chat.Message.Role != "assistant" {
		t.Errorf("/api/chat: got %+v", chat)
	}
	var tags struct {
		Models []struct {
			Name    string
			Details struct {
				Family string `json:"family"`
			}
		}
	}
	_, tb := ts.do(t, "GET", "/api/tags", "")
	json.Unmarshal(tb, &tags)
	if len(tags.Models) != 1 || tags.Models[0].Name != "stories260K:latest" || tags.Models[0].Details.Family != "llama" {
		t.Errorf("/api/tags: got %s", tb)
	}
	var show struct {
		Template  string         `json:"template"`
		ModelInfo map[string]any `json:"model_info"`
	}
	ts.postJSON(t, "/api/show", map[string]any{"model": "stories260K"}, &show)
	if show.ModelInfo["general.architecture"] != "llama" || show.Template == "" {
		t.Errorf("/api/show: got %+v", show)
	}
	_, vb := ts.do(t, "GET", "/api/version", "")
	if !bytes.Contains(vb, []byte(`"version":"test"`)) {
		t.Errorf("/api/version: got %s", vb)
	}
}

func TestOpenAILogprobs(t *testing.T) {
	ts := startServer(t, nil)
	var chat struct {
		Choices []struct {
			Logprobs struct {
				Content []struct {
					Token   string  `json:"token"`
					Logprob float64 `json:"logprob"`
					Bytes   []int   `json:"bytes"`
					Top     []struct {
						Token   string  `json:"token"`
						Logprob float64 `json:"logprob"`
					} `json:"top_logprobs"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	ts.postJSON(t, "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Hi"}},
		"max_tokens": 5, "logprobs": true, "top_logprobs": 3, "temperature": 0}, &chat)
	lp := chat.Choices[0].Logprobs.Content
	if len(lp) != chat.Usage.CompletionTokens || len(lp) == 0 {
		t.Fatalf("got %d logprobs for %d tokens", len(lp), chat.Usage.CompletionTokens)
	}
	for i, c := range lp {
		if len(c.Top) != 3 || c.Logprob > 0 || len(c.Bytes) == 0 {
			t.Errorf("token %d: %+v", i, c)
		}
		// Greedy: the chosen token is the most likely one.
		if c.Top[0].Token != c.Token || c.Top[0].Logprob != c.Logprob {
			t.Errorf("token %d: chose %q (%v), most likely %q (%v)", i, c.Token, c.Logprob, c.Top[0].Token, c.Top[0].Logprob)
		}
	}
	var cmpl struct {
		Choices []struct {
			Text     string
			Logprobs struct {
				Tokens        []string             `json:"tokens"`
				TokenLogprobs []float64            `json:"token_logprobs"`
				TopLogprobs   []map[string]float64 `json:"top_logprobs"`
				TextOffset    []int                `json:"text_offset"`
			}
		}
	}
	ts.postJSON(t, "/v1/completions", map[string]any{"prompt": "Once upon a time", "max_tokens": 6, "logprobs": 2, "temperature": 0}, &cmpl)
	l := cmpl.Choices[0].Logprobs
	if len(l.Tokens) != 6 || len(l.TokenLogprobs) != 6 || len(l.TopLogprobs) != 6 || len(l.TextOffset) != 6 {
		t.Fatalf("got %+v", l)
	}
	if strings.Join(l.Tokens, "") != cmpl.Choices[0].Text {
		t.Errorf("tokens %q do not spell the text %q", l.Tokens, cmpl.Choices[0].Text)
	}
}

// A token's text_offset is where its piece starts in the text, whether or
// not its text was held back for a while (a prefix of a stop string that
// never comes), streamed or not.
func TestCompletionTextOffsets(t *testing.T) {
	ts := startServer(t, nil)
	type logprobs struct {
		Tokens     []string `json:"tokens"`
		TextOffset []int    `json:"text_offset"`
	}
	run := func(stop []string, stream bool) (string, logprobs) {
		body := map[string]any{"prompt": "Once upon a time, there was a little girl named Lily. She", "max_tokens": 40,
			"temperature": 0, "logprobs": 0, "stream": stream}
		if stop != nil {
			body["stop"] = stop
		}
		type choice struct {
			Text     string   `json:"text"`
			Logprobs logprobs `json:"logprobs"`
		}
		if !stream {
			var out struct {
				Choices []choice `json:"choices"`
			}
			ts.postJSON(t, "/v1/completions", body, &out)
			return out.Choices[0].Text, out.Choices[0].Logprobs
		}
		b, _ := json.Marshal(body)
		resp, raw := ts.post(t, "/v1/completions", string(b))
		if resp.StatusCode != 200 {
			t.Fatalf("got %d %s", resp.StatusCode, raw)
		}
		var text strings.Builder
		var lp logprobs
		for _, ev := range sseEvents(raw) {
			var c struct {
				Choices []choice `json:"choices"`
			}
			if err := json.Unmarshal([]byte(ev), &c); err != nil || len(c.Choices) == 0 {
				continue // [DONE]
			}
			text.WriteString(c.Choices[0].Text)
			lp.Tokens = append(lp.Tokens, c.Choices[0].Logprobs.Tokens...)
			lp.TextOffset = append(lp.TextOffset, c.Choices[0].Logprobs.TextOffset...)
		}
		return text.String(), lp
	}
	text0, lp0 := run(nil, false)
	for _, tc := range []struct {
		name   string
		stop   []string
		stream bool
	}{
		{"stop that never matches", []string{" thezzz"}, false},
		{"streamed", nil, true},
		{"streamed, stop that never matches", []string{" thezzz"}, true},
	} {
		text, lp := run(tc.stop, tc.stream)
		if text != text0 || !slices.Equal(lp.Tokens, lp0.Tokens) {
			t.Fatalf("%s: text %q, tokens %q; want %q, %q", tc.name, text, lp.Tokens, text0, lp0.Tokens)
		}
		if !slices.Equal(lp.TextOffset, lp0.TextOffset) {
			t.Errorf("%s: text_offset %v, want %v", tc.name, lp.TextOffset, lp0.TextOffset)
		}
	}
	if !strings.Contains(text0, " the") {
		t.Fatalf("the text %q holds no \" the\", so no stop prefix was ever held back", text0)
	}
	for i, tok := range lp0.Tokens {
		if o := lp0.TextOffset[i]; o+len(tok) > len(text0) || text0[o:o+len(tok)] != tok {
			t.Errorf("token %d %q: text_offset %d", i, tok, o)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
