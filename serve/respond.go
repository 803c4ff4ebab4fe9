package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/muserhq/muser/serve/strictjson"
)

// writeJSON writes v as the JSON response body with the given status.
//
// v is encoded before the status goes out: a value that does not encode
// (a NaN or an infinity, which JSON cannot hold) is a fault of muser's,
// answered as a 500 that says so, never as the status asked for with an
// empty or cut body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		msg, _ := json.Marshal("muser could not encode its answer: " + err.Error())
		b = fmt.Appendf(nil, `{"error":{"code":500,"message":%s,"type":"server_error"}}`, msg)
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// marshal is json.Marshal without HTML escaping ("<|im_end|>" stays
// readable) and without the trailing newline.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// errorBody returns e in the error shape of the request's route family,
// with the request ID.
func errorBody(fam family, e *apiError, id string) any {
	switch fam {
	case famOllama:
		return map[string]any{"error": e.Message, "request_id": id}
	case famOpenAI:
		var param, code any
		if e.Param != "" {
			param = e.Param
		}
		if e.Code != "" {
			code = e.Code
		}
		return map[string]any{"error": map[string]any{
			"message": e.Message, "type": e.Type, "param": param, "code": code, "request_id": id}}
	default:
		return map[string]any{"error": map[string]any{
			"code": e.Status, "message": e.Message, "type": e.Type, "request_id": id}}
	}
}

// fail answers e in the route family's error shape and logs it. When the
// client has gone away (the request's context ended) it answers nothing:
// nobody reads the answer, and the error its departure caused (a
// cancelled task, a wait cut short) is no refusal of the server's; the
// middleware counts the request under statusClientClosed.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, e *apiError) {
	ri := info(r)
	if err := r.Context().Err(); err != nil {
		ri.log.Info("client gone; no answer", "status", e.Status, "code", e.Code, "err", e.Message, "cause", err)
		return
	}
	lvl := ri.log.Info
	if e.Status >= 500 {
		lvl = ri.log.Error
	}
	lvl("request refused", "status", e.Status, "code", e.Code, "param", e.Param, "err", e.Message)
	if e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, errorBody(familyOf(r.URL.Path), e, ri.id))
}

// decode reads the body into v strictly (serve/strictjson) and answers the
// error itself, returning false, when it cannot.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			s.fail(w, r, &apiError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalid, Code: "body_too_large",
				Message: fmt.Sprintf("the request body is larger than %d bytes", mb.Limit)})
		} else {
			s.fail(w, r, badRequest("unreadable_body", "", "reading the request body: %v", err))
		}
		return false
	}
	if err := strictjson.Decode(body, v); err != nil {
		var e *strictjson.Error
		if !errors.As(err, &e) {
			s.fail(w, r, badRequest("invalid_json", "", "%v", err))
			return false
		}
		code := "invalid_json"
		switch {
		case errors.Is(err, strictjson.ErrUnknownField):
			code = "unknown_field"
		case errors.Is(err, strictjson.ErrDuplicateField):
			code = "duplicate_field"
		case errors.Is(err, strictjson.ErrType):
			code = "invalid_type"
		}
		msg := err.Error()
		if errors.Is(err, strictjson.ErrUnknownField) {
			msg = fmt.Sprintf("unknown field %q: muser does not know this field (check its spelling)", e.Path)
		} else if e.Path != "" {
			msg = fmt.Sprintf("field %q: %s", e.Path, e.Msg)
		}
		s.fail(w, r, badRequest(code, e.Path, "%s", msg))
		return false
	}
	return true
}

// streamWriter writes a stream of events: SSE ("data: {...}\n\n") or
// NDJSON ("{...}\n"), flushing each.
type streamWriter struct {
	w       http.ResponseWriter
	sse     bool
	started bool
	err     error
}

func newStream(w http.ResponseWriter, sse bool) *streamWriter {
	return &streamWriter{w: w, sse: sse}
}

func (sw *streamWriter) start() {
	if sw.started {
		return
	}
	sw.started = true
	h := sw.w.Header()
	if sw.sse {
		h.Set("Content-Type", "text/event-stream")
	} else {
		h.Set("Content-Type", "application/x-ndjson")
	}
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	sw.w.WriteHeader(http.StatusOK)
}

// send writes one event; after a failed write it does nothing and Err
// reports the failure (the client went away).
func (sw *streamWriter) send(v any) error {
	if sw.err != nil {
		return sw.err
	}
	sw.start()
	b, err := marshal(v)
	if err != nil {
		sw.err = err
		return err
	}
	if sw.sse {
		_, err = fmt.Fprintf(sw.w, "data: %s\n\n", b)
	} else {
		_, err = fmt.Fprintf(sw.w, "%s\n", b)
	}
	if err == nil {
		err = http.NewResponseController(sw.w).Flush()
	}
	sw.err = err
	return err
}

// done writes SSE's closing "data: [DONE]".
func (sw *streamWriter) done() {
	if sw.err != nil || !sw.sse {
		return
	}
	sw.start()
	if _, err := io.WriteString(sw.w, "data: [DONE]\n\n"); err == nil {
		http.NewResponseController(sw.w).Flush()
	}
}

// decodeStrict is strictjson.Decode, for the UnmarshalJSON methods of
// request types whose values take several forms.
func decodeStrict(b []byte, v any) error { return strictjson.Decode(b, v) }
