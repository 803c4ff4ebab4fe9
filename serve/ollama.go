package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/serve/sched"
)

// This file holds what the Ollama routes share.

// ollamaOptions is Ollama's options object.
type ollamaOptions struct {
	Seed             *int64   `json:"seed"`
	NumPredict       *int     `json:"num_predict"`
	TopK             *int     `json:"top_k"`
	TopP             *float64 `json:"top_p"`
	MinP             *float64 `json:"min_p"`
	Temperature      *float64 `json:"temperature"`
	RepeatPenalty    *float64 `json:"repeat_penalty"`
	RepeatLastN      *int     `json:"repeat_last_n"`
	PresencePenalty  *float64 `json:"presence_penalty"`
	FrequencyPenalty *float64 `json:"frequency_penalty"`
	Stop             []string `json:"stop"`
	NumCtx           *int     `json:"num_ctx"`
	// Hardware and loading options: accepted without effect (muser's
	// engine sizes and places everything itself).
	Numa          json.RawMessage `json:"numa"`
	NumBatch      json.RawMessage `json:"num_batch"`
	NumGPU        json.RawMessage `json:"num_gpu"`
	MainGPU       json.RawMessage `json:"main_gpu"`
	LowVRAM       json.RawMessage `json:"low_vram"`
	F16KV         json.RawMessage `json:"f16_kv"`
	LogitsAll     json.RawMessage `json:"logits_all"`
	VocabOnly     json.RawMessage `json:"vocab_only"`
	UseMmap       json.RawMessage `json:"use_mmap"`
	UseMlock      json.RawMessage `json:"use_mlock"`
	EmbeddingOnly json.RawMessage `json:"embedding_only"`
	NumThread     json.RawMessage `json:"num_thread"`
	NumKeep       json.RawMessage `json:"num_keep"`
	// Known and not supported yet unless at their defaults.
	TFSZ            *float64 `json:"tfs_z"`
	TypicalP        *float64 `json:"typical_p"`
	Mirostat        *int     `json:"mirostat"`
	MirostatTau     *float64 `json:"mirostat_tau"`
	MirostatEta     *float64 `json:"mirostat_eta"`
	PenalizeNewline *bool    `json:"penalize_newline"`
}

// ollamaCommon are the generation fields /api/generate and /api/chat
// share.
type ollamaCommon struct {
	Model       string          `json:"model"`
	Stream      *bool           `json:"stream"`
	Format      json.RawMessage `json:"format"`
	KeepAlive   json.RawMessage `json:"keep_alive"`
	Think       json.RawMessage `json:"think"`
	Logprobs    bool            `json:"logprobs"`
	TopLogprobs int             `json:"top_logprobs"`
	Options     *ollamaOptions  `json:"options"`
	CacheSalt   string          `json:"cache_salt"`
}

// check validates the shared fields and returns the generation settings
// with Ollama's defaults (temperature 0.8, top_k 40, top_p 0.9,
// repeat_penalty 1.1 over the last 64 tokens).
func (s *Server) ollamaGen(c *ollamaCommon, promptArg string) (*genReq, *apiError) {
	if c.Model == "" {
		return nil, badRequest("invalid_value", "model", "model is required")
	}
	if !s.model.knows(c.Model) {
		return nil, &apiError{Status: 404, Type: typeNotFound, Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("model '%s' not found; this server serves %s", c.Model, s.model.ollamaName())}
	}
	constraint, e := s.ollamaFormat(c.Format)
	if e != nil {
		return nil, e
	}
	if isSet(c.Think) && string(c.Think) != "false" {
		return nil, unsupported("think", "think is not supported: %s is not a thinking model", s.model.ollamaName())
	}
	if c.TopLogprobs < 0 || c.TopLogprobs > 20 {
		return nil, badRequest("invalid_value", "top_logprobs", "top_logprobs is %d; want 0 to 20", c.TopLogprobs)
	}
	p := sample.Defaults(0)
	p.TopP, p.RepeatPenalty = 0.9, 1.1
	p.MinP = 0
	g := &genReq{promptArg: promptArg, logprobs: -1, cacheSalt: c.CacheSalt, constraint: constraint}
	if c.Logprobs {
		g.logprobs = c.TopLogprobs
	} else if c.TopLogprobs > 0 {
		return nil, badRequest("invalid_value", "top_logprobs", "top_logprobs needs logprobs: true")
	}
	if o := c.Options; o != nil {
		switch {
		case o.TFSZ != nil && *o.TFSZ != 1:
			return nil, unsupported("options.tfs_z", "")
		case o.TypicalP != nil && *o.TypicalP != 1:
			return nil, unsupported("options.typical_p", "")
		case o.Mirostat != nil && *o.Mirostat != 0:
			return nil, unsupported("options.mirostat", "")
		case o.PenalizeNewline != nil && *o.PenalizeNewline:
			return nil, unsupported("options.penalize_newline", "")
		case o.NumCtx != nil && *o.NumCtx > s.sched.Ctx():
			return nil, badRequest("invalid_value", "options.num_ctx", "options.num_ctx is %d but the server's slots hold %d tokens (--ctx)", *o.NumCtx, s.sched.Ctx())
		}
		samplingOverrides{o.Temperature, o.TopP, o.MinP, o.RepeatPenalty, o.PresencePenalty,
			o.FrequencyPenalty, o.TopK, o.RepeatLastN}.apply(&p)
		g.seed = o.Seed
		g.stop = o.Stop
		if n := o.NumPredict; n != nil {
			switch {
			case *n > 0:
				g.maxTokens = *n
			case *n == 0:
				return nil, unsupported("options.num_predict", "options.num_predict 0 is not supported yet")
			}
		}
	}
	if err := p.Validate(s.model.tok.VocabSize()); err != nil {
		var pe *sample.ParamError
		if asParamError(err, &pe) {
			return nil, badRequest("invalid_value", "options."+pe.Param, "options.%s %s", pe.Param, pe.Reason)
		}
		return nil, badRequest("invalid_value", "options", "%v", err)
	}
	g.sampling = p
	if e := checkStops(g.stop); e != nil {
		return nil, e
	}
	return g, nil
}

// ollamaLogprob is one token of Ollama's logprobs.
type ollamaLogprob struct {
	Token       string          `json:"token"`
	Logprob     float64         `json:"logprob"`
	TopLogprobs []ollamaLogprob `json:"top_logprobs,omitempty"`
}

func (s *Server) ollamaLogprobs(evs []sched.Event) []ollamaLogprob {
	var out []ollamaLogprob
	for _, ev := range evs {
		if ev.Token == sched.NoToken || ev.Logprob == nil {
			continue
		}
		t, _ := s.piece(ev.Token)
		lp := ollamaLogprob{Token: t, Logprob: finite(ev.Logprob.Logprob)}
		for _, x := range ev.Top {
			tt, _ := s.piece(x.ID)
			lp.TopLogprobs = append(lp.TopLogprobs, ollamaLogprob{Token: tt, Logprob: finite(x.Logprob)})
		}
		out = append(out, lp)
	}
	return out
}

func createdAt() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// ollamaDone adds the final fields of a response: done_reason and the
// durations in nanoseconds (prompt_eval_count counts the whole prompt;
// cached_tokens, a muser extension, how much of it came from the cache).
func ollamaDone(m map[string]any, res sched.Result, start time.Time) {
	m["done"] = true
	m["done_reason"] = finishReason(res.Finish)
	m["total_duration"] = res.Done.Sub(start).Nanoseconds()
	m["load_duration"] = 0
	m["prompt_eval_count"] = res.PromptTokens
	m["prompt_eval_duration"] = max(res.PrefillDone.Sub(res.Started).Nanoseconds(), 0)
	m["eval_count"] = len(res.Generated)
	m["eval_duration"] = max(res.Done.Sub(res.PrefillDone).Nanoseconds(), 0)
	m["cached_tokens"] = res.CachedTokens
}

// ollamaRun drives task and answers in Ollama's shape: NDJSON events when
// stream, else one object. piece builds an event (or the whole answer)
// from text and events; last adds the final object's extra fields.
func (s *Server) ollamaRun(w http.ResponseWriter, r *http.Request, task *sched.Task, g *genReq, stream bool,
	piece func(text string) map[string]any, last func(m map[string]any, res sched.Result)) {
	start := info(r).start
	if stream {
		sw := newStream(w, false)
		ok := s.drive(r, task, func(evs []sched.Event) error {
			m := piece(eventsText(evs))
			m["done"] = false
			if g.logprobs >= 0 {
				if lp := s.ollamaLogprobs(evs); len(lp) > 0 {
					m["logprobs"] = lp
				}
			}
			return sw.send(m)
		})
		if !ok {
			return
		}
		res, e := s.finished(r, task)
		if e != nil {
			sw.send(errorBody(famOllama, e, info(r).id))
			return
		}
		m := piece("")
		ollamaDone(m, res, start)
		last(m, res)
		sw.send(m)
		return
	}
	evs, res, ok := s.collect(w, r, task)
	if !ok {
		return
	}
	m := piece(eventsText(evs))
	ollamaDone(m, res, start)
	if g.logprobs >= 0 {
		m["logprobs"] = s.ollamaLogprobs(evs)
	}
	last(m, res)
	writeJSON(w, http.StatusOK, m)
}
