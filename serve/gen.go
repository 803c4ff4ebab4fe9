package serve

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/muserhq/muser/infer/grammar"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/serve/sched"
	"github.com/muserhq/muser/serve/tenant"
)

// genReq is a generation request in route-independent form.
type genReq struct {
	prompt    []int32
	promptArg string // the request field holding the prompt ("messages", "prompt")
	maxTokens int    // ≤ 0: until EOG, a stop string or the context is full
	sampling  sample.Params
	seed      *int64 // nil or negative: a random seed
	stop      []string
	logprobs  int // < 0: none
	cacheSalt string
	noCache   bool
	n         int      // choices; ≤ 1 means one
	tools     *toolSet // nil: no tools
	parallel  *bool    // parallel_tool_calls
	// constraint, when set, restricts the output to a grammar
	// (response_format, grammar, json_schema, format, or a forced tool
	// call, which wins over response_format).
	constraint *grammar.Compiled
}

// seedOf returns the request's seed, or a random one.
func seedOf(seed *int64) uint64 {
	if seed == nil || *seed < 0 {
		return rand.Uint64() >> 1
	}
	return uint64(*seed)
}

// submit queues g and answers the error itself (returning nil) when it
// cannot.
func (s *Server) submit(w http.ResponseWriter, r *http.Request, g *genReq) *sched.Task {
	ri := info(r)
	if len(g.cacheSalt) > tenant.MaxCacheSalt {
		s.fail(w, r, badRequest("invalid_value", "cache_salt", "cache_salt is %d bytes, more than the %d allowed", len(g.cacheSalt), tenant.MaxCacheSalt))
		return nil
	}
	g.sampling.Seed = seedOf(g.seed)
	req := &sched.Request{
		ID:        ri.id,
		Tenant:    ri.tenant,
		Salt:      s.salter.Salt(ri.tenant, g.cacheSalt),
		Prompt:    g.prompt,
		MaxTokens: g.maxTokens,
		Sampling:  g.sampling,
		Stop:      g.stop,
		Logprobs:  g.logprobs,
		NoCache:   g.noCache,
		N:         g.n,
		Route:     r.Pattern,
		Received:  ri.start,
	}
	if g.constraint != nil {
		req.Constraint = g.constraint.NewMatcher(s.model.tok)
	}
	ri.promptTokens = len(g.prompt)
	task, err := s.sched.Submit(r.Context(), req)
	if err != nil {
		s.fail(w, r, s.schedError(err, g.promptArg))
		return nil
	}
	return task
}

// schedError turns a scheduler error into the client's error.
func (s *Server) schedError(err error, promptArg string) *apiError {
	var (
		ce *sched.ContextError
		re *sched.RequestError
	)
	switch {
	case errors.Is(err, sched.ErrQueueFull):
		return &apiError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "queue_full",
			Message: fmt.Sprintf("every slot is busy and %d requests are waiting; retry later", s.sched.QueueDepth())}
	case errors.As(err, &ce):
		return &apiError{Status: 400, Type: typeInvalid, Code: "context_length_exceeded", Param: promptArg,
			Message: fmt.Sprintf("the prompt is %d tokens but the context holds %d tokens (at most %d prompt tokens; see --ctx)",
				ce.Prompt, ce.Ctx, ce.Ctx-1)}
	case errors.As(err, &re):
		param := re.Field
		if param == "prompt" {
			param = promptArg
		}
		return badRequest("invalid_value", param, "%s %s", param, re.Reason)
	case errors.Is(err, sched.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Code: "shutting_down",
			Message: "the server is shutting down"}
	case errors.Is(err, sched.ErrRemotePrefill):
		return &apiError{Status: http.StatusBadGateway, Type: typeUnavailable, Code: "remote_prefill_failed", Message: err.Error()}
	case errors.Is(err, sched.ErrCancelled):
		return &apiError{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Code: "cancelled", Message: err.Error()}
	}
	return &apiError{Status: 500, Type: typeServer, Code: "internal_error", Message: err.Error()}
}

// drive runs task to its end, passing each batch of events to emit. It
// returns false when the client went away or emit failed (the deferred
// Task.Cancel then frees the slot).
func (s *Server) drive(r *http.Request, task *sched.Task, emit func([]sched.Event) error) bool {
	for {
		evs, done, err := task.Next(r.Context())
		if err != nil {
			return false
		}
		if len(evs) > 0 && emit != nil {
			if err := emit(evs); err != nil {
				return false
			}
		}
		if done {
			return true
		}
	}
}

// finished records a finished task in the access log (the scheduler's
// Observer records it in the metrics) and returns its error as the
// client's error, if it failed.
func (s *Server) finished(r *http.Request, task *sched.Task) (sched.Result, *apiError) {
	ri := info(r)
	res := task.Result()
	ri.cachedTokens, ri.genTokens = res.CachedTokens, len(res.Generated)
	if err := task.Err(); err != nil {
		return res, s.schedError(err, "")
	}
	return res, nil
}

// collect runs a non-streaming task to its end and returns every event
// and the result. It returns false when the client went away, or when the
// task failed, after answering the client with the error.
func (s *Server) collect(w http.ResponseWriter, r *http.Request, task *sched.Task) ([]sched.Event, sched.Result, bool) {
	var evs []sched.Event
	if !s.drive(r, task, func(b []sched.Event) error { evs = append(evs, b...); return nil }) {
		return nil, sched.Result{}, false
	}
	res, e := s.finished(r, task)
	if e != nil {
		s.fail(w, r, e)
		return nil, res, false
	}
	return evs, res, true
}

func asParamError(err error, pe **sample.ParamError) bool { return errors.As(err, pe) }

// ms converts a duration to float milliseconds, 0 for negative ones.
func ms(d time.Duration) float64 {
	if d < 0 {
		return 0
	}
	return float64(d.Microseconds()) / 1000
}
