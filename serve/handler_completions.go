package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/muserhq/muser/serve/sched"
)

// completionRequest is POST /v1/completions (OpenAI's legacy text
// completions).
type completionRequest struct {
	Model  string          `json:"model"`
	Prompt json.RawMessage `json:"prompt"`
	samplingFields
	MaxTokens     *int           `json:"max_tokens"`
	Stop          stopList       `json:"stop"`
	Logprobs      *int           `json:"logprobs"`
	N             *int           `json:"n"`
	Stream        *bool          `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	User          string         `json:"user"`
	CacheSalt     string         `json:"cache_salt"`
	// ResponseFormat constrains the output as on /v1/chat/completions
	// (an extension, as in llama-server).
	ResponseFormat *responseFormat `json:"response_format"`
	// Timings asks for muser's timings object, as on
	// /v1/chat/completions (a muser extension: requestTimings).
	Timings *bool `json:"timings"`
	// Known and not supported yet unless at their defaults.
	Echo   *bool   `json:"echo"`
	Suffix *string `json:"suffix"`
	BestOf *int    `json:"best_of"`
}

// defaultCompletionTokens is OpenAI's default max_tokens for
// /v1/completions.
const defaultCompletionTokens = 16

// parsePrompt reads a prompt given as text or token ids. OpenAI's forms
// are a string, an array of one string, an array of token ids, or an
// array of one array of token ids; llama.cpp's /completion also takes an
// array mixing strings and token ids (mixed set), which is tokenized piece
// by piece. An array of several strings and nothing else is several
// prompts in both APIs (llama-server answers each), refused as such.
func (s *Server) parsePrompt(raw json.RawMessage, param string, mixed bool, addSpecial bool) ([]int32, *apiError) {
	if !isSet(raw) {
		return nil, badRequest("invalid_value", param, "%s is missing", param)
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return s.tokenize(text, addSpecial, true, param)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("invalid_type", param, "%s must be a string or an array of token ids", param)
	}
	if len(items) == 0 {
		return nil, badRequest("invalid_value", param, "%s is empty", param)
	}
	// One nested prompt: [["..."]] is not a form; [[1,2]] and ["text"] are.
	if len(items) == 1 {
		if isNull(items[0]) {
			return nil, badRequest("invalid_type", param+"[0]", "%s[0] is null; want a token id or a string", param)
		}
		if json.Unmarshal(items[0], &text) == nil && !mixed {
			return s.tokenize(text, addSpecial, true, param)
		}
		var ids []int32
		if len(items[0]) > 0 && items[0][0] == '[' && json.Unmarshal(items[0], &ids) == nil {
			if i := nullAt(items[0]); i >= 0 {
				return nil, badRequest("invalid_type", fmt.Sprintf("%s[0][%d]", param, i), "%s[0][%d] is null; want a token id", param, i)
			}
			return ids, s.checkTokens(ids, param+"[0]")
		}
	}
	if len(items) > 1 && allStrings(items) {
		return nil, unsupported(param, "%s holds several prompts; muser takes one prompt per request for now", param)
	}
	var ids []int32
	for i, it := range items {
		var id int32
		if isNull(it) {
			// encoding/json would read null as token 0.
			return nil, badRequest("invalid_type", fmt.Sprintf("%s[%d]", param, i), "%s[%d] is null; want a token id or a string", param, i)
		}
		if json.Unmarshal(it, &id) == nil {
			ids = append(ids, id)
			continue
		}
		if json.Unmarshal(it, &text) == nil {
			if !mixed {
				return nil, unsupported(param, "%s holds several prompts; muser takes one prompt per request for now", param)
			}
			piece, e := s.tokenize(text, addSpecial && i == 0, true, fmt.Sprintf("%s[%d]", param, i))
			if e != nil {
				return nil, e
			}
			ids = append(ids, piece...)
			continue
		}
		if len(it) > 0 && it[0] == '[' {
			return nil, unsupported(param, "%s holds several prompts; muser takes one prompt per request for now", param)
		}
		return nil, badRequest("invalid_type", fmt.Sprintf("%s[%d]", param, i), "%s[%d] must be a token id or a string", param, i)
	}
	return ids, s.checkTokens(ids, param)
}

// allStrings reports whether every item of a prompt array is a string:
// several of them are several prompts, in llama.cpp's API as in OpenAI's
// (a string joins token ids in one prompt only beside a token id).
func allStrings(items []json.RawMessage) bool {
	for _, it := range items {
		if len(it) == 0 || it[0] != '"' {
			return false
		}
	}
	return true
}

func (q *completionRequest) check() *apiError {
	switch {
	case q.N != nil && (*q.N < 1 || *q.N > sched.MaxChoices):
		return badRequest("invalid_value", "n", "n is %d; want 1 to %d", *q.N, sched.MaxChoices)
	case q.BestOf != nil && *q.BestOf != 1:
		return unsupported("best_of", "best_of is %d; only 1 is supported for now", *q.BestOf)
	case q.Echo != nil && *q.Echo:
		return unsupported("echo", "echo is not supported yet")
	case q.Suffix != nil && *q.Suffix != "":
		return unsupported("suffix", "suffix (fill in the middle) is not supported yet")
	case q.Logprobs != nil && (*q.Logprobs < 0 || *q.Logprobs > 5):
		return badRequest("invalid_value", "logprobs", "logprobs is %d; want 0 to 5", *q.Logprobs)
	case q.MaxTokens != nil && *q.MaxTokens < 1:
		return badRequest("invalid_value", "max_tokens", "max_tokens is %d; want at least 1", *q.MaxTokens)
	case q.StreamOptions != nil && (q.Stream == nil || !*q.Stream):
		return badRequest("invalid_value", "stream_options", "stream_options is only allowed with stream: true")
	}
	return checkStops(q.Stop)
}

// completionLogprobs is the legacy logprobs object.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// completionLogprobs converts events' log-probabilities; offset is where
// the first event's token starts in the choice's text, and the returned
// offset is where the next one will. A token's text_offset counts the
// bytes of the tokens before it (their pieces, as the stream decoder
// concatenates them), not the text released so far: a token whose text
// is held back (a possible stop string, an unfinished character) is
// released with a later one, and both keep their own offsets.
func (s *Server) completionLogprobs(evs []sched.Event, offset int) (*completionLogprobs, int) {
	lp := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for _, ev := range evs {
		if ev.Token == sched.NoToken {
			continue // held-back text of tokens already counted
		}
		raw, _ := s.model.tok.Piece(ev.Token, false)
		start := offset
		offset += len(raw)
		if ev.Logprob == nil {
			continue
		}
		t, _ := s.piece(ev.Token)
		lp.Tokens = append(lp.Tokens, t)
		lp.TokenLogprobs = append(lp.TokenLogprobs, finite(ev.Logprob.Logprob))
		top := make(map[string]float64, len(ev.Top))
		for _, x := range ev.Top {
			tt, _ := s.piece(x.ID)
			if _, dup := top[tt]; !dup {
				top[tt] = finite(x.Logprob)
			}
		}
		lp.TopLogprobs = append(lp.TopLogprobs, top)
		lp.TextOffset = append(lp.TextOffset, start)
	}
	return lp, offset
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var q completionRequest
	if !s.decode(w, r, &q) {
		return
	}
	if e := s.checkModel(q.Model); e != nil {
		s.fail(w, r, e)
		return
	}
	if e := q.check(); e != nil {
		s.fail(w, r, e)
		return
	}
	p, e := q.params(s.model.tok.VocabSize())
	if e != nil {
		s.fail(w, r, e)
		return
	}
	g := &genReq{promptArg: "prompt", sampling: p, seed: q.Seed, stop: q.Stop, logprobs: -1,
		cacheSalt: q.CacheSalt, maxTokens: defaultCompletionTokens}
	if q.MaxTokens != nil {
		g.maxTokens = *q.MaxTokens
	}
	if q.Logprobs != nil {
		g.logprobs = *q.Logprobs
	}
	if q.N != nil {
		g.n = *q.N
	}
	if g.constraint, e = s.responseFormatGrammar(q.ResponseFormat); e != nil {
		s.fail(w, r, e)
		return
	}
	if g.prompt, e = s.parsePrompt(q.Prompt, "prompt", false, true); e != nil {
		s.fail(w, r, e)
		return
	}
	task := s.submit(w, r, g)
	if task == nil {
		return
	}
	defer task.Cancel()
	id := "cmpl-" + info(r).id
	created := time.Now().Unix()
	obj := func(choices []any, u *usage, withUsage bool) map[string]any {
		m := map[string]any{"id": id, "object": "text_completion", "created": created, "model": s.model.id,
			"system_fingerprint": s.fingerprint(), "choices": choices}
		if withUsage {
			m["usage"] = u
		}
		return m
	}
	choice := func(index int, text string, lp *completionLogprobs, finish *string) map[string]any {
		c := map[string]any{"text": text, "index": index, "logprobs": nil, "finish_reason": finish}
		if lp != nil {
			c["logprobs"] = lp
		}
		return c
	}
	if q.Stream != nil && *q.Stream {
		includeUsage := q.StreamOptions != nil && q.StreamOptions.IncludeUsage
		sw := newStream(w, true)
		offset := make([]int, g.choices())
		ok := s.drive(r, task, func(all []sched.Event) error {
			for i, evs := range byChoice(all, g.choices()) {
				text := eventsText(evs)
				var lp *completionLogprobs
				if g.logprobs >= 0 {
					lp, offset[i] = s.completionLogprobs(evs, offset[i])
				}
				if text == "" && (lp == nil || len(lp.Tokens) == 0) {
					continue
				}
				if err := sw.send(obj([]any{choice(i, text, lp, nil)}, nil, includeUsage)); err != nil {
					return err
				}
			}
			return nil
		})
		if !ok {
			return
		}
		res, e := s.finished(r, task)
		if e != nil {
			sw.send(errorBody(famOpenAI, e, info(r).id))
			return
		}
		// The timings ride on the last chunk: the usage chunk, or else the
		// last choice's finish chunk.
		tm := q.timings(res, info(r).start)
		for i := range g.choices() {
			fr := finishReason(choiceFinish(res, i))
			c := obj([]any{choice(i, "", nil, &fr)}, nil, includeUsage)
			if tm != nil && !includeUsage && i == g.choices()-1 {
				c["timings"] = tm
			}
			if sw.send(c) != nil {
				return
			}
		}
		if includeUsage {
			c := obj([]any{}, usageOf(res), true)
			if tm != nil {
				c["timings"] = tm
			}
			sw.send(c)
		}
		sw.done()
		return
	}
	evs, res, ok := s.collect(w, r, task)
	if !ok {
		return
	}
	groups := byChoice(evs, g.choices())
	choices := make([]any, len(groups))
	for i, evs := range groups {
		var lp *completionLogprobs
		if g.logprobs >= 0 {
			lp, _ = s.completionLogprobs(evs, 0)
		}
		fr := finishReason(choiceFinish(res, i))
		choices[i] = choice(i, eventsText(evs), lp, &fr)
	}
	body := obj(choices, usageOf(res), true)
	if tm := q.timings(res, info(r).start); tm != nil {
		body["timings"] = tm
	}
	writeJSON(w, http.StatusOK, body)
}

// timings returns the request's timings object when it asked for one.
func (q *completionRequest) timings(res sched.Result, received time.Time) *requestTimings {
	if q.Timings == nil || !*q.Timings {
		return nil
	}
	return timingsOf(res, received)
}
