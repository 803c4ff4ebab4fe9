package serve

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/serve/sched"
)

// llamaRequest is llama.cpp's POST /completion.
type llamaRequest struct {
	Prompt           json.RawMessage `json:"prompt"`
	Model            string          `json:"model"`
	NPredict         *int            `json:"n_predict"`
	Stream           bool            `json:"stream"`
	CachePrompt      *bool           `json:"cache_prompt"`
	Temperature      *float64        `json:"temperature"`
	TopK             *int            `json:"top_k"`
	TopP             *float64        `json:"top_p"`
	MinP             *float64        `json:"min_p"`
	Seed             *int64          `json:"seed"`
	Stop             []string        `json:"stop"`
	RepeatPenalty    *float64        `json:"repeat_penalty"`
	RepeatLastN      *int            `json:"repeat_last_n"`
	PresencePenalty  *float64        `json:"presence_penalty"`
	FrequencyPenalty *float64        `json:"frequency_penalty"`
	LogitBias        llamaBias       `json:"logit_bias"`
	NProbs           int             `json:"n_probs"`
	IgnoreEOS        bool            `json:"ignore_eos"`
	ReturnTokens     bool            `json:"return_tokens"`
	IDSlot           *int            `json:"id_slot"`
	CacheSalt        string          `json:"cache_salt"`
	// Grammar (GBNF) or JSONSchema constrains the output (structured.go).
	Grammar    string          `json:"grammar"`
	JSONSchema json.RawMessage `json:"json_schema"`
	// Known and not supported yet unless at their defaults.
	ImageData         json.RawMessage `json:"image_data"`
	Mirostat          int             `json:"mirostat"`
	MirostatTau       json.RawMessage `json:"mirostat_tau"`
	MirostatEta       json.RawMessage `json:"mirostat_eta"`
	TypicalP          *float64        `json:"typical_p"`
	TFSZ              *float64        `json:"tfs_z"`
	DynatempRange     float64         `json:"dynatemp_range"`
	DynatempExponent  json.RawMessage `json:"dynatemp_exponent"`
	DryMultiplier     float64         `json:"dry_multiplier"`
	XTCProbability    float64         `json:"xtc_probability"`
	Samplers          json.RawMessage `json:"samplers"`
	Lora              json.RawMessage `json:"lora"`
	PostSamplingProbs bool            `json:"post_sampling_probs"`
	NKeep             *int            `json:"n_keep"`
	TMaxPredictMS     int             `json:"t_max_predict_ms"`
	NIndent           int             `json:"n_indent"`
	ResponseFields    json.RawMessage `json:"response_fields"`
}

// llamaBias is llama.cpp's logit_bias: an array of [token, bias] pairs
// (bias false bans the token) or an object of "token": bias.
type llamaBias map[int32]float64

// UnmarshalJSON accepts both forms.
func (b *llamaBias) UnmarshalJSON(data []byte) error {
	*b = llamaBias{}
	if len(data) > 0 && data[0] == '{' {
		var m map[string]float64
		if err := decodeStrict(data, &m); err != nil {
			return err
		}
		for k, v := range m {
			var id int32
			if _, err := fmt.Sscanf(k, "%d", &id); err != nil || fmt.Sprint(id) != k {
				return fmt.Errorf("logit_bias key %q is not a token id", k)
			}
			(*b)[id] = v
		}
		return nil
	}
	var pairs [][]json.RawMessage
	if err := json.Unmarshal(data, &pairs); err != nil {
		return fmt.Errorf("want an array of [token, bias] pairs or an object of token: bias")
	}
	for i, p := range pairs {
		var id int32
		if len(p) != 2 || isNull(p[0]) || json.Unmarshal(p[0], &id) != nil {
			return fmt.Errorf("element %d: want [token id, bias]", i)
		}
		if string(p[1]) == "false" {
			(*b)[id] = math.Inf(-1)
			continue
		}
		var v float64
		if err := json.Unmarshal(p[1], &v); err != nil || isNull(p[1]) {
			return fmt.Errorf("element %d: the bias must be a number or false", i)
		}
		(*b)[id] = v
	}
	return nil
}

func (q *llamaRequest) unsupported() *apiError {
	switch {
	case q.Grammar != "" && isSet(q.JSONSchema):
		return badRequest("invalid_value", "grammar", "grammar and json_schema are both set; give one")
	case isSet(q.ImageData):
		return unsupported("image_data", "")
	case q.Mirostat != 0 || isSet(q.MirostatTau) || isSet(q.MirostatEta):
		return unsupported("mirostat", "")
	case q.TypicalP != nil && *q.TypicalP != 1:
		return unsupported("typical_p", "")
	case q.TFSZ != nil && *q.TFSZ != 1:
		return unsupported("tfs_z", "")
	case q.DynatempRange != 0 || isSet(q.DynatempExponent):
		return unsupported("dynatemp_range", "")
	case q.DryMultiplier != 0:
		return unsupported("dry_multiplier", "")
	case q.XTCProbability != 0:
		return unsupported("xtc_probability", "")
	case isSet(q.Samplers):
		return unsupported("samplers", "samplers is not supported yet; muser's chain is fixed (infer/sample)")
	case isSet(q.Lora):
		return unsupported("lora", "")
	case q.PostSamplingProbs:
		return unsupported("post_sampling_probs", "")
	case q.TMaxPredictMS != 0:
		return unsupported("t_max_predict_ms", "")
	case q.NIndent != 0:
		return unsupported("n_indent", "")
	case isSet(q.ResponseFields):
		return unsupported("response_fields", "")
	case q.IDSlot != nil && *q.IDSlot != -1:
		return unsupported("id_slot", "id_slot is not supported yet; the scheduler picks the slot")
	case q.NProbs < 0 || q.NProbs > 100:
		return badRequest("invalid_value", "n_probs", "n_probs is %d; want 0 to 100", q.NProbs)
	}
	return checkStops(q.Stop)
}

// samplingOverrides are the llama.cpp-style sampling fields that
// /completion and Ollama's options share; a nil field keeps the value
// already in the parameters.
type samplingOverrides struct {
	temperature, topP, minP, repeatPenalty, presencePenalty, frequencyPenalty *float64
	topK, repeatLastN                                                         *int
}

// apply writes the fields that are set into p.
func (o samplingOverrides) apply(p *sample.Params) {
	for _, f := range []struct {
		dst *float64
		v   *float64
	}{
		{&p.Temperature, o.temperature}, {&p.TopP, o.topP}, {&p.MinP, o.minP},
		{&p.RepeatPenalty, o.repeatPenalty}, {&p.PresencePenalty, o.presencePenalty},
		{&p.FrequencyPenalty, o.frequencyPenalty},
	} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if o.topK != nil {
		p.TopK = *o.topK
	}
	if o.repeatLastN != nil {
		p.PenaltyLastN = *o.repeatLastN
	}
}

// params applies llama.cpp's defaults: temperature 0.8, top_k 40, top_p
// 0.95, min_p 0.05, repeat_penalty 1 over the last 64 tokens.
func (q *llamaRequest) params(vocab int, eog []int32) (sample.Params, *apiError) {
	p := sample.Defaults(0)
	samplingOverrides{q.Temperature, q.TopP, q.MinP, q.RepeatPenalty, q.PresencePenalty,
		q.FrequencyPenalty, q.TopK, q.RepeatLastN}.apply(&p)
	if p.Temperature < 0 {
		p.Temperature = 0 // llama.cpp: a negative temperature is greedy
	}
	if len(q.LogitBias) > 0 || q.IgnoreEOS {
		p.LogitBias = map[int32]float64{}
		for id, v := range q.LogitBias {
			p.LogitBias[id] = v
		}
		if q.IgnoreEOS {
			for _, id := range eog {
				p.LogitBias[id] = math.Inf(-1)
			}
		}
	}
	if err := p.Validate(vocab); err != nil {
		var pe *sample.ParamError
		if ok := asParamError(err, &pe); ok {
			return p, badRequest("invalid_value", pe.Param, "%s %s", pe.Param, pe.Reason)
		}
		return p, badRequest("invalid_value", "", "%v", err)
	}
	return p, nil
}

// llamaProb is one token of completion_probabilities.
type llamaProb struct {
	ID          int32       `json:"id"`
	Token       string      `json:"token"`
	Logprob     float64     `json:"logprob"`
	Bytes       []int       `json:"bytes"`
	TopLogprobs []llamaProb `json:"top_logprobs,omitempty"`
}

// llamaProbs returns the probabilities of the events' tokens: an array,
// empty when they hold no token (text held back and released later).
func (s *Server) llamaProbs(evs []sched.Event) []llamaProb {
	out := []llamaProb{}
	for _, ev := range evs {
		if ev.Token == sched.NoToken || ev.Logprob == nil {
			continue
		}
		t, b := s.piece(ev.Token)
		p := llamaProb{ID: ev.Token, Token: t, Logprob: finite(ev.Logprob.Logprob), Bytes: b}
		for _, x := range ev.Top {
			tt, tb := s.piece(x.ID)
			p.TopLogprobs = append(p.TopLogprobs, llamaProb{ID: x.ID, Token: tt, Logprob: finite(x.Logprob), Bytes: tb})
		}
		out = append(out, p)
	}
	return out
}

func eventTokens(evs []sched.Event) []int32 {
	out := []int32{}
	for _, ev := range evs {
		if ev.Token != sched.NoToken {
			out = append(out, ev.Token)
		}
	}
	return out
}

// llamaTimings is llama.cpp's timings object.
func llamaTimings(res sched.Result) map[string]any {
	promptN := res.PromptTokens - res.CachedTokens
	promptMS := ms(res.PrefillDone.Sub(res.Started))
	predN := len(res.Generated)
	predMS := ms(res.Done.Sub(res.PrefillDone))
	per := func(n int, t float64) (float64, float64) {
		if n == 0 || t <= 0 {
			return 0, 0
		}
		return t / float64(n), 1000 * float64(n) / t
	}
	ppt, pps := per(promptN, promptMS)
	dpt, dps := per(predN, predMS)
	return map[string]any{
		"cache_n": res.CachedTokens, "prompt_n": promptN, "prompt_ms": promptMS,
		"prompt_per_token_ms": ppt, "prompt_per_second": pps,
		"predicted_n": predN, "predicted_ms": predMS, "predicted_per_token_ms": dpt, "predicted_per_second": dps,
	}
}

func stopType(res sched.Result) string {
	switch {
	case res.Finish == sched.FinishLength:
		return "limit"
	case res.StopWord != "":
		return "word"
	case res.EOG:
		return "eos"
	}
	return "none"
}

func (s *Server) handleLlamaCompletion(w http.ResponseWriter, r *http.Request) {
	var q llamaRequest
	if !s.decode(w, r, &q) {
		return
	}
	s.llamaCompletion(w, r, &q, nil)
}

// llamaCompletion runs a decoded /completion request; prompt, when not
// nil, makes the prompt's tokens instead of q.Prompt (/infill does).
func (s *Server) llamaCompletion(w http.ResponseWriter, r *http.Request, q *llamaRequest, prompt func() ([]int32, *apiError)) {
	if e := s.checkModel(q.Model); e != nil {
		s.fail(w, r, e)
		return
	}
	if e := q.unsupported(); e != nil {
		s.fail(w, r, e)
		return
	}
	p, e := q.params(s.model.tok.VocabSize(), s.model.tok.EOGs())
	if e != nil {
		s.fail(w, r, e)
		return
	}
	g := &genReq{promptArg: "prompt", sampling: p, seed: q.Seed, stop: q.Stop, logprobs: -1, cacheSalt: q.CacheSalt}
	if q.NPredict != nil && *q.NPredict >= 0 {
		if *q.NPredict == 0 {
			s.fail(w, r, unsupported("n_predict", "n_predict 0 (prompt processing only) is not supported yet"))
			return
		}
		g.maxTokens = *q.NPredict
	}
	if q.NProbs > 0 {
		g.logprobs = q.NProbs
	}
	switch {
	case q.Grammar != "":
		g.constraint, e = s.gbnfGrammar(q.Grammar, "grammar")
	case isSet(q.JSONSchema):
		g.constraint, e = s.schemaGrammar(q.JSONSchema, false, "json_schema")
	}
	if e != nil {
		s.fail(w, r, e)
		return
	}
	if q.CachePrompt != nil && !*q.CachePrompt {
		g.noCache = true
	}
	if prompt != nil {
		g.prompt, e = prompt()
	} else {
		g.prompt, e = s.parsePrompt(q.Prompt, "prompt", true, true)
	}
	if e != nil {
		s.fail(w, r, e)
		return
	}
	task := s.submit(w, r, g)
	if task == nil {
		return
	}
	defer task.Cancel()
	final := func(res sched.Result, content string, evs []sched.Event) map[string]any {
		m := map[string]any{
			"index": 0, "content": content, "id_slot": res.Slot, "stop": true, "model": s.model.id,
			"tokens_predicted": len(res.Generated), "tokens_evaluated": res.PromptTokens,
			"generation_settings": s.generationSettings(g), "has_new_line": strings.Contains(content, "\n"),
			"truncated": false, "stop_type": stopType(res), "stopping_word": res.StopWord,
			"tokens_cached": res.CachedTokens, "timings": llamaTimings(res),
			"tokens": []int32{},
		}
		if q.ReturnTokens {
			m["tokens"] = eventTokens(evs)
		}
		if g.logprobs > 0 && !q.Stream {
			// Streamed, the chunks carried them; the final chunk adds no
			// token and, as llama-server's, has none.
			m["completion_probabilities"] = s.llamaProbs(evs)
		}
		return m
	}
	if q.Stream {
		sw := newStream(w, true)
		ok := s.drive(r, task, func(evs []sched.Event) error {
			m := map[string]any{"index": 0, "content": eventsText(evs), "stop": false, "id_slot": task.Result().Slot,
				"tokens": []int32{}}
			if q.ReturnTokens {
				m["tokens"] = eventTokens(evs)
			}
			if g.logprobs > 0 {
				m["completion_probabilities"] = s.llamaProbs(evs)
			}
			return sw.send(m)
		})
		if !ok {
			return
		}
		res, e := s.finished(r, task)
		if e != nil {
			sw.send(errorBody(famLlama, e, info(r).id))
			return
		}
		sw.send(final(res, "", nil))
		return
	}
	evs, res, ok := s.collect(w, r, task)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, final(res, eventsText(evs), evs))
}

// generationSettings describes a request's sampling as llama.cpp's
// generation_settings does.
func (s *Server) generationSettings(g *genReq) map[string]any {
	p := g.sampling
	stop := g.stop
	if stop == nil {
		stop = []string{} // llama-server's is always an array
	}
	return map[string]any{
		"n_ctx": s.sched.Ctx(), "n_predict": g.maxTokens, "temperature": p.Temperature, "top_k": p.TopK,
		"top_p": p.TopP, "min_p": p.MinP, "repeat_penalty": p.RepeatPenalty, "repeat_last_n": p.PenaltyLastN,
		"presence_penalty": p.PresencePenalty, "frequency_penalty": p.FrequencyPenalty, "seed": p.Seed,
		"stop": stop, "n_probs": max(g.logprobs, 0), "cache_prompt": !g.noCache,
	}
}
