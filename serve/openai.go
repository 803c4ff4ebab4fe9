package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/serve/sched"
)

// This file holds what the OpenAI routes share: request pieces that take
// several JSON forms, sampling parameters, logprobs and usage.

// stopList is OpenAI's stop: a string or an array of strings.
type stopList []string

// maxStops bounds the stop strings of a request (OpenAI allows 4).
const maxStops = 16

// UnmarshalJSON accepts a string or an array of strings; null is no stop
// strings, as for a field left out.
func (s *stopList) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		*s = nil
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = stopList{one}
		return nil
	}
	if len(b) > 0 && b[0] == '[' {
		var many []string
		if err := json.Unmarshal(b, &many); err != nil || nullAt(b) >= 0 {
			return fmt.Errorf("got an array that is not all strings; want a string or an array of strings")
		}
		*s = many
		return nil
	}
	return fmt.Errorf("want a string or an array of strings")
}

func checkStops(stops []string) *apiError {
	if len(stops) > maxStops {
		return badRequest("invalid_value", "stop", "stop lists %d strings; at most %d are allowed", len(stops), maxStops)
	}
	for i, x := range stops {
		if len(x) > 1024 {
			return badRequest("invalid_value", fmt.Sprintf("stop[%d]", i), "stop[%d] is %d bytes; at most 1024 are allowed", i, len(x))
		}
	}
	return nil
}

// isSet reports whether a raw JSON field was given a value other than
// null.
func isSet(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// isNull reports whether raw is the JSON null (white space aside).
func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// nullAt returns the index of the first null element of the JSON array
// raw, or -1 (also when raw is no array): encoding/json reads a null
// element as the element type's zero, which a token id, a stop string or
// a bias must never silently become.
func nullAt(raw json.RawMessage) int {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return -1
	}
	for i, it := range items {
		if isNull(it) {
			return i
		}
	}
	return -1
}

// streamOptions is stream_options.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
	// IncludeObfuscation is accepted and has no effect: muser does not
	// pad stream events.
	IncludeObfuscation *bool `json:"include_obfuscation"`
}

// samplingFields are the sampling fields the OpenAI routes share, with
// muser's (and llama.cpp's) top_k and min_p beside them.
type samplingFields struct {
	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	TopK             *int               `json:"top_k"`
	MinP             *float64           `json:"min_p"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
	Seed             *int64             `json:"seed"`
}

// params turns the fields into sampler parameters with OpenAI's defaults
// (temperature 1, top_p 1, no top_k or min_p, no penalties) and ranges.
func (f *samplingFields) params(vocab int) (sample.Params, *apiError) {
	p := sample.Params{Temperature: 1, TopP: 1, RepeatPenalty: 1}
	rng := func(name string, v *float64, lo, hi float64, dst *float64) *apiError {
		if v == nil {
			return nil
		}
		if math.IsNaN(*v) || *v < lo || *v > hi {
			return badRequest("invalid_value", name, "%s is %v; want %v to %v", name, *v, lo, hi)
		}
		*dst = *v
		return nil
	}
	for _, e := range []*apiError{
		rng("temperature", f.Temperature, 0, 2, &p.Temperature),
		rng("top_p", f.TopP, 0, 1, &p.TopP),
		rng("min_p", f.MinP, 0, 1, &p.MinP),
		rng("presence_penalty", f.PresencePenalty, -2, 2, &p.PresencePenalty),
		rng("frequency_penalty", f.FrequencyPenalty, -2, 2, &p.FrequencyPenalty),
	} {
		if e != nil {
			return p, e
		}
	}
	if f.TopK != nil {
		if *f.TopK < 0 {
			return p, badRequest("invalid_value", "top_k", "top_k is %d; want 0 (all) or more", *f.TopK)
		}
		p.TopK = *f.TopK
	}
	if p.PresencePenalty != 0 || p.FrequencyPenalty != 0 {
		p.PenaltyLastN = 64 // the last 64 tokens, prompt included, as llama.cpp's server does
	}
	if len(f.LogitBias) > 0 {
		keys := make([]string, 0, len(f.LogitBias))
		for k := range f.LogitBias {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		p.LogitBias = make(map[int32]float64, len(keys))
		for _, k := range keys {
			param := fmt.Sprintf("logit_bias[%q]", k)
			id, err := strconv.ParseInt(k, 10, 32)
			if err != nil || id < 0 || int(id) >= vocab {
				return p, badRequest("invalid_value", param, "logit_bias key %q is not a token id of this model (0 to %d)", k, vocab-1)
			}
			b := f.LogitBias[k]
			if math.IsNaN(b) || b < -100 || b > 100 {
				return p, badRequest("invalid_value", param, "logit_bias for token %s is %v; want -100 to 100", k, b)
			}
			p.LogitBias[int32(id)] = b
		}
	}
	return p, nil
}

// usage is OpenAI's usage object.
type usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails promptDetails `json:"prompt_tokens_details"`
}

type promptDetails struct {
	// CachedTokens are the prompt tokens served from the store (or the
	// slot's own KV) rather than computed.
	CachedTokens int `json:"cached_tokens"`
}

func usageOf(res sched.Result) *usage {
	return &usage{
		PromptTokens:        res.PromptTokens,
		CompletionTokens:    len(res.Generated),
		TotalTokens:         res.PromptTokens + len(res.Generated),
		PromptTokensDetails: promptDetails{CachedTokens: res.CachedTokens},
	}
}

func finishReason(f sched.Finish) string {
	if f == sched.FinishLength {
		return "length"
	}
	return "stop"
}

// tokenLogprob is one token of chat logprobs.content.
type tokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []topLogprob `json:"top_logprobs"`
}

type topLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// finite keeps -Inf log-probabilities (banned tokens) JSON-encodable.
func finite(v float64) float64 {
	if math.IsInf(v, -1) {
		return -9999
	}
	return v
}

// piece returns a token's text and bytes.
func (s *Server) piece(id int32) (string, []int) {
	p, _ := s.model.tok.Piece(id, false)
	b := make([]int, len(p))
	for i := 0; i < len(p); i++ {
		b[i] = int(p[i])
	}
	return strings.ToValidUTF8(p, "\uFFFD"), b
}

// chatLogprobs converts events' log-probabilities.
func (s *Server) chatLogprobs(evs []sched.Event) []tokenLogprob {
	var out []tokenLogprob
	for _, ev := range evs {
		if ev.Token == sched.NoToken || ev.Logprob == nil {
			continue
		}
		t, b := s.piece(ev.Token)
		lp := tokenLogprob{Token: t, Logprob: finite(ev.Logprob.Logprob), Bytes: b, TopLogprobs: []topLogprob{}}
		for _, x := range ev.Top {
			tt, tb := s.piece(x.ID)
			lp.TopLogprobs = append(lp.TopLogprobs, topLogprob{Token: tt, Logprob: finite(x.Logprob), Bytes: tb})
		}
		out = append(out, lp)
	}
	return out
}

// eventsText concatenates events' text.
func eventsText(evs []sched.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(ev.Text)
	}
	return b.String()
}

// checkModel answers whether the request's model names the served one.
func (s *Server) checkModel(name string) *apiError {
	if s.model.knows(name) {
		return nil
	}
	return &apiError{Status: 404, Type: typeNotFound, Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("the model %q does not exist; this server serves %q", name, s.model.id)}
}
