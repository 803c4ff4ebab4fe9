package serve

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/serve/sched"
)

// This file holds what the embeddings routes share: the pooling, the
// input forms, and running the inputs through the scheduler.

// maxEmbedInputs bounds the inputs of one embeddings request (OpenAI's
// limit).
const maxEmbedInputs = 2048

// resolvePooling decides the served model's pooling: Options.Pooling,
// else the file's <arch>.pooling_type, else Options.FallbackPooling, else
// none.
func resolvePooling(opts Options, m *engine.Model) (engine.Pooling, error) {
	if opts.Pooling != "" {
		p, err := engine.ParsePooling(opts.Pooling)
		if err != nil {
			return 0, &OptionError{Option: "--pooling", Reason: fmt.Sprintf("is %q; want none, mean, cls or last", opts.Pooling)}
		}
		return p, nil
	}
	p, ok, err := engine.ReadPooling(&m.File().Meta, m.Config().Arch)
	if err != nil {
		return 0, err
	}
	if ok {
		return p, nil
	}
	if opts.FallbackPooling != "" {
		p, err := engine.ParsePooling(opts.FallbackPooling)
		if err != nil {
			return 0, &OptionError{Option: "FallbackPooling", Reason: fmt.Sprintf("is %q; want none, mean, cls or last", opts.FallbackPooling)}
		}
		return p, nil
	}
	return engine.PoolingNone, nil
}

// Pooling returns the pooling the server's embeddings use.
func (s *Server) Pooling() engine.Pooling { return s.pooling }

// parseEmbedInputs reads embeddings inputs in OpenAI's forms: a string,
// an array of strings, an array of token ids (one input), or an array of
// arrays of token ids. Text is tokenized with BOS (as llama-server does),
// special tokens parsed. Every input must be non-empty.
func (s *Server) parseEmbedInputs(raw json.RawMessage, param string) ([][]int32, *apiError) {
	if !isSet(raw) {
		return nil, badRequest("invalid_value", param, "%s is missing", param)
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if text == "" {
			return nil, badRequest("invalid_value", param, "%s is an empty string", param)
		}
		ids, e := s.tokenize(text, true, true, param)
		if e != nil {
			return nil, e
		}
		return [][]int32{ids}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("invalid_type", param, "%s must be a string, an array of strings, an array of token ids or an array of arrays of token ids", param)
	}
	switch {
	case len(items) == 0:
		return nil, badRequest("invalid_value", param, "%s is empty", param)
	case len(items) > maxEmbedInputs:
		return nil, badRequest("invalid_value", param, "%s holds %d inputs; at most %d are allowed", param, len(items), maxEmbedInputs)
	}
	// One input of token ids?
	var ids []int32
	if items[0][0] != '[' && items[0][0] != '"' {
		for i, it := range items {
			if c := it[0]; c != '-' && (c < '0' || c > '9') {
				return nil, badRequest("invalid_type", fmt.Sprintf("%s[%d]", param, i), "%s[%d] must be a token id", param, i)
			}
		}
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, badRequest("invalid_type", param, "%s mixes token ids with other values; want an array of token ids", param)
		}
		return [][]int32{ids}, s.checkTokens(ids, param)
	}
	out := make([][]int32, len(items))
	for i, it := range items {
		at := fmt.Sprintf("%s[%d]", param, i)
		switch {
		case json.Unmarshal(it, &text) == nil:
			if text == "" {
				return nil, badRequest("invalid_value", at, "%s is an empty string", at)
			}
			x, e := s.tokenize(text, true, true, at)
			if e != nil {
				return nil, e
			}
			out[i] = x
		case it[0] == '[' && json.Unmarshal(it, &ids) == nil && nullAt(it) < 0: // a null would read as token 0
			if len(ids) == 0 {
				return nil, badRequest("invalid_value", at, "%s is empty", at)
			}
			if e := s.checkTokens(ids, at); e != nil {
				return nil, e
			}
			out[i] = ids
		default:
			return nil, badRequest("invalid_type", at, "%s must be a string or an array of token ids", at)
		}
	}
	return out, nil
}

// embedding is one input's result.
type embedding struct {
	vec    []float32   // the pooled embedding (nil for pooling none)
	tokens [][]float32 // every token's state (pooling none only)
	n      int         // the input's tokens
}

// embedOptions say how embed pools and scales.
type embedOptions struct {
	pooling   engine.Pooling // PoolingNone: every token's state, unpooled
	normalize bool           // L2-normalize pooled vectors
	truncate  bool           // cut inputs longer than the context (Ollama)
	param     string         // the request field holding the inputs
}

// checkEmbeddings refuses embeddings on a device that cannot compute them.
func (s *Server) checkEmbeddings() *apiError {
	if err := s.model.eng.CheckHiddenStates(); err != nil {
		return &apiError{Status: http.StatusNotImplemented, Type: typeServer, Code: "not_implemented", Message: err.Error()}
	}
	return nil
}

// checkDimensions refuses a dimensions field (OpenAI's and Ollama's)
// other than the model's: muser does not shorten embeddings.
func (s *Server) checkDimensions(d *int) *apiError {
	if H := s.model.eng.Config().Hidden; d != nil && *d != H {
		return unsupported("dimensions", "dimensions is %d; the served model's embeddings have %d dimensions, and muser does not shorten them", *d, H)
	}
	return nil
}

// noPooling is the 400 for a pooled embedding of a model without pooling.
func noPooling(param string) *apiError {
	return badRequest("invalid_value", param, "%s: the served model has no pooling (its pooling_type is none), so it gives no single "+
		"embedding per input; restart muser serve with --pooling mean, cls or last", param)
}

// embed runs every input as an embeddings request, at most one per slot
// at a time, and answers the error itself (returning nil) when one fails.
func (s *Server) embed(w http.ResponseWriter, r *http.Request, inputs [][]int32, o embedOptions) []embedding {
	if e := s.checkEmbeddings(); e != nil {
		s.fail(w, r, e)
		return nil
	}
	ctx := s.sched.Ctx()
	total := 0
	for i, in := range inputs {
		if len(in) >= ctx {
			if !o.truncate {
				at := o.param
				if len(inputs) > 1 {
					at = fmt.Sprintf("%s[%d]", o.param, i)
				}
				s.fail(w, r, &apiError{Status: 400, Type: typeInvalid, Code: "context_length_exceeded", Param: at,
					Message: fmt.Sprintf("%s is %d tokens but the context holds %d tokens (at most %d input tokens; see --ctx)", at, len(in), ctx, ctx-1)})
				return nil
			}
			inputs[i] = in[:ctx-1]
		}
		total += len(inputs[i])
	}
	ri := info(r)
	ri.promptTokens = total
	hidden := engine.OutputAll
	if o.pooling == engine.PoolingLast {
		hidden = engine.OutputLast
	}
	H := s.model.eng.Config().Hidden
	out := make([]embedding, len(inputs))
	rctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	window := max(s.sched.Slots(), 1)
	type pending struct {
		i    int
		task *sched.Task
	}
	var inflight []pending
	salt := s.salter.Salt(ri.tenant, "")
	wait := func(p pending) *apiError {
		defer p.task.Cancel()
		res, err := p.task.Wait(rctx)
		if err == nil && len(res.Hidden) == 0 {
			err = errors.New("the scheduler returned no hidden states")
		}
		if err != nil {
			return s.embedError(err, o.param)
		}
		ri.cachedTokens += res.CachedTokens
		e := embedding{n: len(inputs[p.i])}
		if o.pooling == engine.PoolingNone {
			for j := 0; j+H <= len(res.Hidden); j += H {
				e.tokens = append(e.tokens, res.Hidden[j:j+H])
			}
		} else {
			v, err := engine.Pool(o.pooling, res.Hidden, H)
			if err != nil {
				return &apiError{Status: 500, Type: typeServer, Code: "internal_error", Message: err.Error()}
			}
			if o.normalize {
				engine.Normalize(v)
			}
			e.vec = v
		}
		out[p.i] = e
		return nil
	}
	for i, in := range inputs {
		if len(inflight) == window {
			if e := wait(inflight[0]); e != nil {
				s.fail(w, r, e) // the deferred cancel ends the other tasks
				return nil
			}
			inflight = inflight[1:]
		}
		task, err := s.sched.Submit(rctx, &sched.Request{ID: fmt.Sprintf("%s/%d", ri.id, i), Tenant: ri.tenant,
			Salt: salt, Prompt: in, Hidden: hidden, Route: r.Pattern, Received: ri.start})
		if err != nil {
			s.fail(w, r, s.embedError(err, o.param))
			return nil
		}
		inflight = append(inflight, pending{i, task})
	}
	for _, p := range inflight {
		if e := wait(p); e != nil {
			s.fail(w, r, e)
			return nil
		}
	}
	return out
}

// embedError maps a scheduler error of an embeddings request.
func (s *Server) embedError(err error, param string) *apiError {
	var de *engine.DeviceError
	if errors.As(err, &de) {
		return &apiError{Status: http.StatusNotImplemented, Type: typeServer, Code: "not_implemented", Message: err.Error()}
	}
	return s.schedError(err, param)
}

// float32sBase64 encodes v as OpenAI's encoding_format "base64" does: the
// little-endian float32 bytes, in standard base64.
func float32sBase64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
