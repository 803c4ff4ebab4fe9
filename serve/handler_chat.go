package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/muserhq/muser/infer/template"
	"github.com/muserhq/muser/serve/sched"
)

// chatRequest is POST /v1/chat/completions.
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	samplingFields
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
	Stop                stopList       `json:"stop"`
	Logprobs            *bool          `json:"logprobs"`
	TopLogprobs         *int           `json:"top_logprobs"`
	N                   *int           `json:"n"`
	Stream              *bool          `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	User                string         `json:"user"`
	// CacheSalt separates this request's cache entries within its
	// tenant (as in vLLM).
	CacheSalt      string          `json:"cache_salt"`
	ResponseFormat *responseFormat `json:"response_format"`
	// Accepted without effect.
	Store            *bool             `json:"store"`
	Metadata         map[string]string `json:"metadata"`
	ServiceTier      *string           `json:"service_tier"`
	SafetyIdentifier string            `json:"safety_identifier"`
	PromptCacheKey   string            `json:"prompt_cache_key"`
	// Tools and ToolChoice: see tools.go. ParallelToolCalls false keeps
	// the first call of a reply only.
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	// Known and not supported yet: a 400 when set.
	Functions            json.RawMessage `json:"functions"`
	FunctionCall         json.RawMessage `json:"function_call"`
	Audio                json.RawMessage `json:"audio"`
	Modalities           []string        `json:"modalities"`
	Prediction           json.RawMessage `json:"prediction"`
	ReasoningEffort      json.RawMessage `json:"reasoning_effort"`
	Verbosity            json.RawMessage `json:"verbosity"`
	WebSearchOptions     json.RawMessage `json:"web_search_options"`
	Moderation           json.RawMessage `json:"moderation"`
	PromptCacheRetention json.RawMessage `json:"prompt_cache_retention"`
	PromptCacheOptions   json.RawMessage `json:"prompt_cache_options"`

	// Timings asks for muser's timings object in the answer (a muser
	// extension: requestTimings).
	Timings *bool `json:"timings"`
}

// responseFormat is response_format (structured.go turns it into a
// grammar); Schema is llama-server's json_object form.
type responseFormat struct {
	Type       string          `json:"type"`
	JSONSchema json.RawMessage `json:"json_schema"`
	Schema     json.RawMessage `json:"schema"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content *messageContent `json:"content"`
	Name    string          `json:"name"`
	Refusal *string         `json:"refusal"`
	// ToolCalls are an assistant message's calls; ToolCallID names the
	// call a tool message answers.
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID *string         `json:"tool_call_id"`
	// Known and not supported yet.
	FunctionCall json.RawMessage `json:"function_call"`
	Audio        json.RawMessage `json:"audio"`
}

// messageContent is a message's content: a string or an array of parts.
type messageContent struct {
	Text    string
	Parts   []contentPart
	IsParts bool
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// Known and not supported yet.
	ImageURL   json.RawMessage `json:"image_url"`
	InputAudio json.RawMessage `json:"input_audio"`
	File       json.RawMessage `json:"file"`
	Refusal    json.RawMessage `json:"refusal"`
}

// UnmarshalJSON accepts a string or an array of content parts.
func (c *messageContent) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &c.Text)
	case len(b) > 0 && b[0] == '[':
		c.IsParts = true
		return decodeStrict(b, &c.Parts)
	}
	return fmt.Errorf("want a string or an array of content parts")
}

// unsupportedChat returns the 400 for the first known-but-unsupported
// field that is set.
func (q *chatRequest) unsupported() *apiError {
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{
		{"functions", q.Functions},
		{"function_call", q.FunctionCall}, {"audio", q.Audio}, {"prediction", q.Prediction},
		{"reasoning_effort", q.ReasoningEffort}, {"verbosity", q.Verbosity},
		{"web_search_options", q.WebSearchOptions}, {"moderation", q.Moderation},
		{"prompt_cache_retention", q.PromptCacheRetention}, {"prompt_cache_options", q.PromptCacheOptions},
	} {
		if isSet(f.raw) {
			return unsupported(f.name, "")
		}
	}
	if q.N != nil && (*q.N < 1 || *q.N > sched.MaxChoices) {
		return badRequest("invalid_value", "n", "n is %d; want 1 to %d", *q.N, sched.MaxChoices)
	}
	for i, m := range q.Modalities {
		if m != "text" {
			return unsupported(fmt.Sprintf("modalities[%d]", i), "modality %q is not supported yet; muser generates text", m)
		}
	}
	return nil
}

// messages converts the conversation for the chat template.
func (q *chatRequest) messages() ([]template.Message, *apiError) {
	if len(q.Messages) == 0 {
		return nil, badRequest("invalid_value", "messages", "messages is empty; want at least one message")
	}
	out := make([]template.Message, 0, len(q.Messages))
	for i, m := range q.Messages {
		p := fmt.Sprintf("messages[%d]", i)
		for _, f := range []struct {
			name string
			raw  json.RawMessage
		}{{"function_call", m.FunctionCall}, {"audio", m.Audio}} {
			if isSet(f.raw) {
				return nil, unsupported(p+"."+f.name, "")
			}
		}
		role := m.Role
		switch role {
		case "system", "user", "assistant":
		case "developer":
			role = "system" // OpenAI's newer name for system instructions
		case "tool":
			if m.ToolCallID == nil || *m.ToolCallID == "" {
				return nil, badRequest("invalid_value", p+".tool_call_id", "%s.tool_call_id is missing; a tool message answers a call by its id", p)
			}
		case "function":
			return nil, unsupported(p+".role", "role \"function\" (the legacy functions API) is not supported; use tools")
		case "":
			return nil, badRequest("invalid_value", p+".role", "%s.role is missing", p)
		default:
			return nil, badRequest("invalid_value", p+".role", "role %q is not one of system, developer, user, assistant", role)
		}
		tm := template.Message{Role: role, Name: m.Name}
		if isSet(m.ToolCalls) {
			if role != "assistant" {
				return nil, badRequest("invalid_value", p+".tool_calls", "%s.tool_calls is only allowed on an assistant message", p)
			}
			calls, e := parseWireCalls(m.ToolCalls, p+".tool_calls")
			if e != nil {
				return nil, e
			}
			tm.ToolCalls = calls
		}
		if m.ToolCallID != nil {
			if role != "tool" {
				return nil, badRequest("invalid_value", p+".tool_call_id", "%s.tool_call_id is only allowed on a tool message", p)
			}
			tm.ToolCallID = *m.ToolCallID
		}
		switch c := m.Content; {
		case c == nil:
			tm.NullContent = len(tm.ToolCalls) > 0
			if role != "assistant" {
				return nil, badRequest("invalid_value", p+".content", "%s.content is missing", p)
			}
		case c.IsParts:
			var texts []string
			for j, part := range c.Parts {
				pp := fmt.Sprintf("%s.content[%d]", p, j)
				if part.Type != "text" {
					return nil, unsupported(pp+".type", "content part type %q is not supported yet; only \"text\" is", part.Type)
				}
				if isSet(part.ImageURL) || isSet(part.InputAudio) || isSet(part.File) || isSet(part.Refusal) {
					return nil, badRequest("invalid_value", pp, "a text part holds only type and text")
				}
				texts = append(texts, part.Text)
			}
			tm.Content = strings.Join(texts, "\n")
		default:
			tm.Content = c.Text
		}
		out = append(out, tm)
	}
	return out, nil
}

// chatChunk is one event of a streamed chat completion.
type chatChunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint"`
	Choices           []chunkChoice `json:"choices"`
	Usage             *usage        `json:"usage,omitempty"`
	nullUsage         bool

	// Timings is muser's timings object, on the last chunk, when the
	// request asked for it.
	Timings *requestTimings `json:"timings,omitempty"`
}

// MarshalJSON writes "usage": null when the request asked for usage and
// this is not the usage chunk (as OpenAI does).
func (c chatChunk) MarshalJSON() ([]byte, error) {
	type plain chatChunk
	if c.Usage == nil && c.nullUsage {
		return marshal(struct {
			plain
			Usage *usage `json:"usage"`
		}{plain: plain(c)})
	}
	return marshal(plain(c))
}

type chunkChoice struct {
	Index        int            `json:"index"`
	Delta        chatDelta      `json:"delta"`
	Logprobs     *choiceLogprob `json:"logprobs"`
	FinishReason *string        `json:"finish_reason"`
}

type chatDelta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []deltaToolCall `json:"tool_calls,omitempty"`
}

type choiceLogprob struct {
	Content []tokenLogprob `json:"content"`
	Refusal []tokenLogprob `json:"refusal"`
}

func (s *Server) fingerprint() string {
	k := s.identity.Key()
	return fmt.Sprintf("fp_%x", k[:6])
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var q chatRequest
	if !s.decode(w, r, &q) {
		return
	}
	if e := s.chatGen(&q); e != nil {
		s.fail(w, r, e)
		return
	}
	g, e := s.chatGenReq(&q)
	if e != nil {
		s.fail(w, r, e)
		return
	}
	task := s.submit(w, r, g)
	if task == nil {
		return
	}
	defer task.Cancel()
	id := "chatcmpl-" + info(r).id
	created := time.Now().Unix()
	if q.Stream != nil && *q.Stream {
		s.streamChat(w, r, task, &q, g, id, created)
		return
	}
	evs, res, ok := s.collect(w, r, task)
	if !ok {
		return
	}
	groups := byChoice(evs, g.choices())
	choices := make([]any, len(groups))
	for i, evs := range groups {
		text := eventsText(evs)
		msg := map[string]any{"role": "assistant", "content": text, "refusal": nil}
		finish := finishReason(choiceFinish(res, i))
		if g.tools.parses() {
			content, calls := parseToolCalls(g.tools.format, text)
			if calls != nil {
				calls = g.keepCalls(calls)
				msg["content"] = nilIfBlank(content)
				msg["tool_calls"] = wireToolCalls(info(r).id, i, calls)
				if !anyPartial(calls) {
					finish = "tool_calls" // a call cut short keeps "length"
				}
			}
		}
		choice := map[string]any{"index": i, "message": msg, "logprobs": nil, "finish_reason": finish}
		if g.logprobs >= 0 {
			choice["logprobs"] = choiceLogprob{Content: s.chatLogprobs(evs), Refusal: nil}
		}
		choices[i] = choice
	}
	body := map[string]any{
		"id": id, "object": "chat.completion", "created": created, "model": s.model.id,
		"system_fingerprint": s.fingerprint(),
		"choices":            choices,
		"usage":              usageOf(res),
	}
	if q.Timings != nil && *q.Timings {
		body["timings"] = timingsOf(res, info(r).start)
	}
	writeJSON(w, http.StatusOK, body)
}

// chatGen checks the fields that need no model.
func (s *Server) chatGen(q *chatRequest) *apiError {
	if e := s.checkModel(q.Model); e != nil {
		return e
	}
	if e := q.unsupported(); e != nil {
		return e
	}
	if q.StreamOptions != nil && (q.Stream == nil || !*q.Stream) {
		return badRequest("invalid_value", "stream_options", "stream_options is only allowed with stream: true")
	}
	return checkStops(q.Stop)
}

func (s *Server) chatGenReq(q *chatRequest) (*genReq, *apiError) {
	p, e := q.params(s.model.tok.VocabSize())
	if e != nil {
		return nil, e
	}
	g := &genReq{promptArg: "messages", sampling: p, seed: q.Seed, stop: q.Stop, logprobs: -1, cacheSalt: q.CacheSalt,
		parallel: q.ParallelToolCalls}
	if q.N != nil {
		g.n = *q.N
	}
	switch {
	case q.MaxCompletionTokens != nil:
		g.maxTokens = *q.MaxCompletionTokens
		if g.maxTokens < 1 {
			return nil, badRequest("invalid_value", "max_completion_tokens", "max_completion_tokens is %d; want at least 1", g.maxTokens)
		}
	case q.MaxTokens != nil:
		g.maxTokens = *q.MaxTokens
		if g.maxTokens < 1 {
			return nil, badRequest("invalid_value", "max_tokens", "max_tokens is %d; want at least 1", g.maxTokens)
		}
	}
	if q.Logprobs != nil && *q.Logprobs {
		g.logprobs = 0
		if q.TopLogprobs != nil {
			if *q.TopLogprobs < 0 || *q.TopLogprobs > 20 {
				return nil, badRequest("invalid_value", "top_logprobs", "top_logprobs is %d; want 0 to 20", *q.TopLogprobs)
			}
			g.logprobs = *q.TopLogprobs
		}
	} else if q.TopLogprobs != nil {
		return nil, badRequest("invalid_value", "top_logprobs", "top_logprobs needs logprobs: true")
	}
	if g.constraint, e = s.responseFormatGrammar(q.ResponseFormat); e != nil {
		return nil, e
	}
	msgs, e := q.messages()
	if e != nil {
		return nil, e
	}
	if e := s.toolPrompt(g, msgs, q.Tools, q.ToolChoice, "messages"); e != nil {
		return nil, e
	}
	return g, nil
}

func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, task *sched.Task, q *chatRequest, g *genReq, id string, created int64) {
	sw := newStream(w, true)
	includeUsage := q.StreamOptions != nil && q.StreamOptions.IncludeUsage
	wantLogprobs := q.Logprobs != nil && *q.Logprobs
	fp := s.fingerprint() // a hash of the identity: once, not per chunk
	chunk := func(choice int, d chatDelta, lp *choiceLogprob, finish *string) chatChunk {
		return chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.model.id,
			SystemFingerprint: fp, nullUsage: includeUsage,
			Choices: []chunkChoice{{Index: choice, Delta: d, Logprobs: lp, FinishReason: finish}}}
	}
	n := g.choices()
	streams := make([]*toolStream, n)
	ncalls := make([]int, n)        // calls sent per choice
	partial := make([]bool, n)      // a call was cut short
	skip := make([]map[int]bool, n) // calls dropped by parallel_tool_calls: false
	for i := range streams {
		streams[i] = &toolStream{f: toolFormatNone, record: true}
		if g.tools.parses() {
			streams[i].f = g.tools.format
		}
		skip[i] = map[int]bool{}
	}
	// send writes what choice's stream released, in order; lp rides on
	// the first content chunk (or alone).
	send := func(choice int, lp *choiceLogprob) error {
		var err error
		put := func(d chatDelta, lp *choiceLogprob) {
			if err == nil {
				err = sw.send(chunk(choice, d, lp, nil))
			}
		}
		head := func(k int, name string) {
			if k > 0 && !g.parallelCalls() {
				skip[choice][k] = true
				return
			}
			ncalls[choice]++
			put(chatDelta{ToolCalls: []deltaToolCall{{Index: k, ID: toolCallID(info(r).id, choice, k), Type: "function",
				Function: deltaFunction{Name: name, Arguments: ""}}}}, nil)
		}
		args := func(k int, a string) {
			if !skip[choice][k] {
				put(chatDelta{ToolCalls: []deltaToolCall{{Index: k, Function: deltaFunction{Arguments: a}}}}, nil)
			}
		}
		for _, p := range streams[choice].drain() {
			switch {
			case p.Call != nil:
				if !p.Streamed {
					head(p.Index, p.Call.Name)
					args(p.Index, p.Call.Arguments)
				}
				if !skip[choice][p.Index] { // a dropped call does not decide finish_reason (as unstreamed)
					partial[choice] = partial[choice] || p.Call.Partial
				}
			case p.Name != "":
				head(p.Index, p.Name)
			case p.Args != "":
				args(p.Index, p.Args)
			default:
				text := p.Text
				put(chatDelta{Content: &text}, lp)
				lp = nil
			}
		}
		if lp != nil {
			empty := ""
			put(chatDelta{Content: &empty}, lp)
		}
		return err
	}
	empty := ""
	cur := 0
	if sw.send(chunk(0, chatDelta{Role: "assistant", Content: &empty}, nil, nil)) != nil {
		return
	}
	ok := s.drive(r, task, func(evs []sched.Event) error {
		for _, grp := range byChoice(evs, n) {
			if len(grp) == 0 {
				continue
			}
			c := grp[0].Choice
			for cur < c { // the earlier choices are done
				streams[cur].flush()
				if err := send(cur, nil); err != nil {
					return err
				}
				cur++
				if err := sw.send(chunk(cur, chatDelta{Role: "assistant", Content: &empty}, nil, nil)); err != nil {
					return err
				}
			}
			streams[c].write(eventsText(grp))
			var lp *choiceLogprob
			if wantLogprobs {
				if l := s.chatLogprobs(grp); len(l) > 0 {
					lp = &choiceLogprob{Content: l}
				}
			}
			if err := send(c, lp); err != nil {
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
	var tm *requestTimings
	if q.Timings != nil && *q.Timings {
		tm = timingsOf(res, info(r).start)
	}
	for ; cur < n; cur++ {
		streams[cur].flush()
		if send(cur, nil) != nil {
			return
		}
		if cur+1 < n && sw.send(chunk(cur+1, chatDelta{Role: "assistant", Content: &empty}, nil, nil)) != nil {
			return
		}
	}
	for i := range n {
		fr := finishReason(choiceFinish(res, i))
		if ncalls[i] > 0 && !partial[i] {
			fr = "tool_calls"
		}
		last := chunk(i, chatDelta{}, nil, &fr)
		if !includeUsage && i == n-1 {
			last.Timings = tm
		}
		if sw.send(last) != nil {
			return
		}
	}
	if includeUsage {
		sw.send(chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.model.id,
			SystemFingerprint: fp, Choices: []chunkChoice{}, Usage: usageOf(res), Timings: tm})
	}
	sw.done()
}
