package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/muserhq/muser/serve/dashboard"
	"github.com/muserhq/muser/serve/tenant"
)

// family is an API family: it decides the error shape of a route.
type family uint8

const (
	famLlama  family = iota // llama.cpp: {"error":{"code","message","type"}}
	famOpenAI               // /v1/...: {"error":{"message","type","param","code"}}
	famOllama               // /api/...: {"error":"..."}
)

func familyOf(path string) family {
	switch {
	case strings.HasPrefix(path, "/v1/"):
		return famOpenAI
	case strings.HasPrefix(path, "/api/"):
		return famOllama
	}
	return famLlama
}

// reqInfo is what the middleware learns about a request; handlers read it
// through the context and fill in what they learn.
type reqInfo struct {
	start  time.Time
	id     string
	tenant string
	log    *slog.Logger
	// Filled by handlers, for the access log.
	promptTokens, cachedTokens, genTokens int
}

type ctxKey struct{}

func info(r *http.Request) *reqInfo {
	if ri, ok := r.Context().Value(ctxKey{}).(*reqInfo); ok {
		return ri
	}
	return &reqInfo{log: slog.New(slog.DiscardHandler)}
}

// statusClientClosed is the status the access log and /metrics give a
// request whose client went away before any answer was written (nginx's
// 499, "client closed request"); no response carries it.
const statusClientClosed = 499

// statusWriter records the status and size of a response. It passes
// Flush through for streaming, and bounds every write: with a timeout,
// the connection's write deadline is renewed before each write and flush
// (and each writeSpan bytes of a large write), so a write that makes no
// progress for the timeout fails, however long the answer runs.
type statusWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController // the connection's, for its write deadline
	timeout time.Duration            // ≤ 0: no bound
	status  int
	bytes   int64
	err     error // the first failed write or flush
}

// writeSpan is the most bytes written under one deadline: a large answer
// (an export's chunk) needs a client that reads writeSpan bytes per
// timeout, not the whole answer.
const writeSpan = 64 << 10

func newStatusWriter(w http.ResponseWriter, timeout time.Duration) *statusWriter {
	sw := &statusWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}
	sw.renew() // also bounds what net/http writes itself (100 Continue, the end of the answer)
	return sw
}

// renew moves the write deadline to timeout from now. A writer without a
// connection (a test's recorder) has none to move.
func (w *statusWriter) renew() {
	if w.timeout > 0 {
		w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	}
}

func (w *statusWriter) failed(err error) error {
	if err != nil && w.err == nil {
		w.err = err
	}
	return err
}

// stalled reports whether a write failed because the client read nothing
// for the timeout.
func (w *statusWriter) stalled() bool { return errors.Is(w.err, os.ErrDeadlineExceeded) }

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n := 0
	for {
		span := b
		if w.timeout > 0 && len(span) > writeSpan {
			span = span[:writeSpan]
		}
		w.renew()
		m, err := w.ResponseWriter.Write(span)
		n += m
		w.bytes += int64(m)
		b = b[m:]
		if err != nil || len(b) == 0 {
			return n, w.failed(err)
		}
	}
}

// FlushError flushes the response, reporting a failed write (http.
// ResponseController.Flush uses it).
func (w *statusWriter) FlushError() error {
	w.renew()
	err := w.rc.Flush()
	if errors.Is(err, http.ErrNotSupported) {
		return nil // nothing to flush to
	}
	return w.failed(err)
}

func (w *statusWriter) Flush() { w.FlushError() }

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// validRequestID reports whether a client's X-Request-Id can be used as
// is: 1 to 128 characters from A–Z a–z 0–9 and "-_.:".
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:", c) >= 0) {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// publicPath reports whether a route answers without an API key.
func publicPath(method, path string) bool {
	if strings.HasPrefix(path, adminPrefix) {
		return true // the admin endpoint has its own access rule (handler_admin.go)
	}
	if (method == http.MethodGet || method == http.MethodHead) && (path == "/" || strings.HasPrefix(path, dashboard.Prefix)) {
		return true // the page and Ollama's probe hold no data; the dashboard's state has the admin endpoint's rule
	}
	return (method == http.MethodGet || method == http.MethodHead) && (path == "/health" || path == "/metrics" || path == "/api/version")
}

// middleware wraps the routes: request ID, access log, recovery, write
// bound (statusWriter), body limit and authentication, outermost first.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set("X-Request-Id", id)
		ri := &reqInfo{start: start, id: id, log: s.log.With("request_id", id)}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, ri))
		sw := newStatusWriter(w, s.opts.WriteTimeout)
		defer func() {
			p := recover()
			if sw.stalled() {
				ri.log.Warn("client stopped reading: answer abandoned", "method", r.Method, "path", r.URL.Path,
					"write_timeout", s.opts.WriteTimeout, "bytes", sw.bytes)
			}
			if p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				ri.log.Error("handler panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if sw.status == 0 {
					s.fail(sw, r, &apiError{Status: 500, Type: typeServer, Code: "internal_error",
						Message: "internal error; the server log has the details under this request ID"})
				}
			}
			if sw.status == 0 && r.Context().Err() != nil {
				sw.status = statusClientClosed
			}
			s.metrics.request(r.Pattern, sw.status)
			logReq := ri.log.Info
			if r.URL.Path == "/metrics" && sw.status == http.StatusOK {
				logReq = ri.log.Debug // scrapes every few seconds would drown the log
			}
			if r.URL.Path == dashboard.StatePath && sw.status == http.StatusOK {
				logReq = ri.log.Debug // so would the dashboard's polls
			}
			logReq("request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
				"bytes", sw.bytes, "duration", time.Since(start),
				"prompt_tokens", ri.promptTokens, "cached_tokens", ri.cachedTokens, "generated_tokens", ri.genTokens)
		}()
		if r.URL.Path != adminPrefix+"import" { // an export file may be large; Import bounds what it reads
			r.Body = http.MaxBytesReader(sw, r.Body, s.opts.MaxBodyBytes)
		}
		if s.keys == nil {
			// Without keys the server listens on loopback only and every
			// caller is the local user: a page from elsewhere in a local
			// browser is not.
			ri.tenant = tenant.Local
			if !publicPath(r.Method, r.URL.Path) {
				if err := localPage(r); err != nil {
					s.fail(sw, r, &apiError{Status: http.StatusForbidden, Type: typeAuth, Code: "forbidden",
						Message: "request " + err.Error() + " (a server without --api-keys serves this machine's own clients)"})
					return
				}
			}
		} else if !publicPath(r.Method, r.URL.Path) {
			key, ok := bearer(r)
			tn, found := "", false
			if ok {
				tn, found = s.keys.Lookup(key)
			}
			if !found {
				sw.Header().Set("WWW-Authenticate", `Bearer realm="muser"`)
				msg := "missing API key: send Authorization: Bearer KEY"
				if ok {
					msg = "invalid API key"
				}
				s.fail(sw, r, &apiError{Status: 401, Type: typeAuth, Code: "invalid_api_key", Message: msg})
				return
			}
			ri.tenant = tn
		}
		ri.log = ri.log.With("tenant", ri.tenant)
		next.ServeHTTP(sw, r)
	})
}

// bearer returns the key of an "Authorization: Bearer KEY" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	key = strings.TrimSpace(key)
	return key, key != ""
}
