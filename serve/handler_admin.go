package serve

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/serve/adminapi"
	"github.com/muserhq/muser/serve/strictjson"
)

// adminPrefix is where the admin endpoint's routes live.
const adminPrefix = "/admin/v1/"

// MinAdminKey is the shortest admin key LoadAdminKey accepts.
const MinAdminKey = 16

// LoadAdminKey reads the admin key from path: the file's content with
// surrounding white space trimmed, at least MinAdminKey bytes.
func LoadAdminKey(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--admin-key-file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4097))
	if err != nil {
		return "", fmt.Errorf("--admin-key-file %s: %w", path, err)
	}
	if len(b) > 4096 {
		return "", &OptionError{Option: "--admin-key-file", Reason: fmt.Sprintf("%s: longer than 4096 bytes", path)}
	}
	key := strings.TrimSpace(string(b))
	if len(key) < MinAdminKey {
		return "", &OptionError{Option: "--admin-key-file", Reason: fmt.Sprintf("%s: the key is %d bytes; want at least %d", path, len(key), MinAdminKey)}
	}
	return key, nil
}

// adminRoutes registers the admin endpoint (docs/serve.md, "Admin
// endpoint"): the store's operator commands, carried out by this server,
// which owns the store.
func (s *Server) adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/v1/packs", s.admin(s.handleAdminPacks))
	mux.HandleFunc("GET /admin/v1/stats", s.admin(s.handleAdminStats))
	mux.HandleFunc("GET /admin/v1/packs/{id}", s.admin(s.handleAdminInspect))
	mux.HandleFunc("DELETE /admin/v1/packs/{id}", s.admin(s.handleAdminDelete))
	mux.HandleFunc("GET /admin/v1/packs/{id}/export", s.admin(s.handleAdminExport))
	mux.HandleFunc("POST /admin/v1/packs/{id}/pin", s.admin(s.handleAdminPin(true)))
	mux.HandleFunc("POST /admin/v1/packs/{id}/unpin", s.admin(s.handleAdminPin(false)))
	mux.HandleFunc("POST /admin/v1/remove", s.admin(s.handleAdminRemove))
	mux.HandleFunc("POST /admin/v1/verify", s.admin(s.handleAdminVerify))
	mux.HandleFunc("POST /admin/v1/gc", s.admin(s.handleAdminGC))
	mux.HandleFunc("POST /admin/v1/import", s.admin(s.handleAdminImport))
	mux.HandleFunc("GET /admin/v1/receipts", s.admin(s.handleAdminReceipts))
	mux.HandleFunc("GET /admin/v1/receipts/{id}", s.admin(s.handleAdminReceipt))
	mux.HandleFunc("GET /admin/v1/nodes", s.admin(s.handleAdminNodes))
	mux.HandleFunc(adminPrefix, s.admin(func(w http.ResponseWriter, r *http.Request) {
		s.adminFail(w, r, &adminapi.Error{Status: http.StatusNotFound, Code: adminapi.CodeNotFound,
			Message: fmt.Sprintf("no admin route %s %s", r.Method, r.URL.Path)})
	}))
}

// admin wraps an admin handler with its access rule: with an admin key
// configured, "Authorization: Bearer KEY" from anyone; without one,
// loopback clients only, and a browser's cross-origin request is refused
// (a page from elsewhere must not drive a local server's admin routes).
// Tenant API keys never grant admin access.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.adminAllowed(r); err != nil {
			if s.adminKey != "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="muser admin"`)
			}
			s.adminFail(w, r, &adminapi.Error{Status: http.StatusUnauthorized, Code: adminapi.CodeUnauthorized, Message: err.Error()})
			return
		}
		h(w, r)
		if r.Method != http.MethodGet {
			// gc, remove, import and verify's quarantine change the
			// store outside the scheduler, which reports its bytes only
			// after its own publishes.
			if st, err := s.store.Stats(); err == nil {
				s.metrics.StoreBytes(st.Bytes)
			}
		}
	}
}

func (s *Server) adminAllowed(r *http.Request) error {
	if s.adminKey != "" {
		key, ok := bearer(r)
		if !ok {
			return errors.New("admin access needs Authorization: Bearer ADMIN_KEY (the key in the server's --admin-key-file)")
		}
		if subtle.ConstantTimeCompare([]byte(key), []byte(s.adminKey)) != 1 {
			return errors.New("wrong admin key")
		}
		return nil
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("admin access from %s refused: without --admin-key-file only loopback clients are admitted", r.RemoteAddr)
	}
	// A proxy on this host makes every client look local: a forwarded
	// request is not a loopback client's.
	if r.Header.Get("Forwarded") != "" || r.Header.Get("X-Forwarded-For") != "" {
		return errors.New("admin access through a proxy refused: without --admin-key-file only loopback clients are admitted")
	}
	if err := localPage(r); err != nil {
		return fmt.Errorf("admin access %w (without --admin-key-file)", err)
	}
	return nil
}

// localPage refuses what a web page from elsewhere can make a browser
// send to a server on this machine: a host name other than a loopback one
// (a page whose name resolves to 127.0.0.1, DNS rebinding, sends its
// own), or a cross-origin request (a form or script of another site).
func localPage(r *http.Request) error {
	if !loopbackHost(r.Host) {
		return fmt.Errorf("for host %q refused: only localhost and loopback addresses are admitted", r.Host)
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return fmt.Errorf("from origin %q refused: not this server's own pages", o)
		}
	}
	return nil
}

// loopbackHost reports whether a Host header names this machine's
// loopback interface: localhost or a loopback IP, with or without a port.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return loopbackName(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
}

// loopbackName reports whether host (without a port) is localhost or a
// loopback IP.
func loopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// adminFail answers err in the admin error shape.
func (s *Server) adminFail(w http.ResponseWriter, r *http.Request, err error) {
	e := adminapi.ErrorOf(err)
	ri := info(r)
	lvl := ri.log.Info
	if e.Status >= 500 {
		lvl = ri.log.Error
	}
	lvl("admin request failed", "status", e.Status, "code", e.Code, "err", e.Message)
	writeJSON(w, e.Status, map[string]any{"error": e, "request_id": ri.id})
}

// adminReply answers v, or err in the admin error shape.
func (s *Server) adminReply(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		s.adminFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// adminDecode reads an optional JSON body into v strictly; an empty body
// leaves v zero.
func (s *Server) adminDecode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		e := &adminapi.Error{Status: http.StatusBadRequest, Code: adminapi.CodeInvalid,
			Message: fmt.Sprintf("reading the request body: %v", err)}
		var mb *http.MaxBytesError
		if errors.As(err, &mb) { // as every other route answers it
			e.Status, e.Message = http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d bytes", mb.Limit)
		}
		s.adminFail(w, r, e)
		return false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return true
	}
	if err := strictjson.Decode(body, v); err != nil {
		msg := err.Error()
		var e *strictjson.Error
		if errors.As(err, &e) && e.Path != "" {
			msg = fmt.Sprintf("field %q: %s", e.Path, e.Msg)
			if errors.Is(err, strictjson.ErrUnknownField) {
				msg = fmt.Sprintf("unknown field %q", e.Path)
			}
		}
		s.adminFail(w, r, &adminapi.Error{Status: http.StatusBadRequest, Code: adminapi.CodeInvalid, Message: msg})
		return false
	}
	return true
}

func (s *Server) handleAdminPacks(w http.ResponseWriter, r *http.Request) {
	v, err := s.adminAPI.Packs(r.Context())
	s.adminReply(w, r, v, err)
}

func (s *Server) handleAdminStats(w http.ResponseWriter, r *http.Request) {
	v, err := s.adminAPI.Stats(r.Context())
	s.adminReply(w, r, v, err)
}

func (s *Server) handleAdminInspect(w http.ResponseWriter, r *http.Request) {
	v, err := s.adminAPI.Inspect(r.Context(), r.PathValue("id"))
	s.adminReply(w, r, v, err)
}

// handleAdminExport streams a pack's export file. An error before the
// first byte is the admin error shape; after it, the stream is broken off
// (the client sees a truncated transfer, never a complete-looking file).
func (s *Server) handleAdminExport(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	cw := &countingWriter{w: w}
	err := s.adminAPI.Export(r.Context(), r.PathValue("id"), cw)
	if err == nil {
		return
	}
	if cw.n == 0 {
		w.Header().Del("Content-Type")
		s.adminFail(w, r, err)
		return
	}
	info(r).log.Error("admin export failed mid-stream", "pack", r.PathValue("id"), "bytes", cw.n, "err", err)
	panic(http.ErrAbortHandler)
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (s *Server) handleAdminDelete(w http.ResponseWriter, r *http.Request) {
	v, err := s.adminAPI.Remove(r.Context(), adminapi.RemoveRequest{Packs: []string{r.PathValue("id")}})
	s.adminReply(w, r, v, err)
}

func (s *Server) handleAdminRemove(w http.ResponseWriter, r *http.Request) {
	var req adminapi.RemoveRequest
	if !s.adminDecode(w, r, &req) {
		return
	}
	v, err := s.adminAPI.Remove(r.Context(), req)
	s.adminReply(w, r, v, err)
}

func (s *Server) handleAdminPin(pin bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := s.adminAPI.Pin(r.Context(), r.PathValue("id"), pin)
		s.adminReply(w, r, v, err)
	}
}

func (s *Server) handleAdminVerify(w http.ResponseWriter, r *http.Request) {
	var req adminapi.VerifyRequest
	if !s.adminDecode(w, r, &req) {
		return
	}
	start := time.Now()
	if r.Header.Get("Accept") == adminapi.ProgressContentType {
		s.verifyStream(w, r, req, start)
		return
	}
	v, err := s.adminAPI.Verify(r.Context(), req, nil)
	if err == nil {
		s.metrics.observeVerify(time.Since(start))
	}
	s.adminReply(w, r, v, err)
}

// verifyStream answers a verify as NDJSON lines of adminapi.VerifyEvent:
// progress at most every 100 ms and when the last chunk is read, then the
// report or the error (the status is 200 once the stream began).
func (s *Server) verifyStream(w http.ResponseWriter, r *http.Request, req adminapi.VerifyRequest, start time.Time) {
	w.Header().Set("Content-Type", adminapi.ProgressContentType)
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	var last time.Time
	v, err := s.adminAPI.Verify(r.Context(), req, func(done, total int) {
		if now := time.Now(); done == total || now.Sub(last) >= 100*time.Millisecond {
			last = now
			enc.Encode(adminapi.VerifyEvent{Progress: &adminapi.Progress{Done: done, Total: total}})
			flush()
		}
	})
	if err != nil {
		e := adminapi.ErrorOf(err)
		info(r).log.Info("admin request failed", "status", e.Status, "code", e.Code, "err", e.Message)
		enc.Encode(adminapi.VerifyEvent{Error: e})
		return
	}
	s.metrics.observeVerify(time.Since(start))
	enc.Encode(adminapi.VerifyEvent{Report: &v})
}

func (s *Server) handleAdminGC(w http.ResponseWriter, r *http.Request) {
	var req adminapi.GCRequest
	if !s.adminDecode(w, r, &req) {
		return
	}
	v, err := s.adminAPI.GC(r.Context(), req)
	if err == nil && !v.DryRun {
		s.metrics.gcEvicted(len(v.Removed))
	}
	s.adminReply(w, r, v, err)
}

func (s *Server) handleAdminImport(w http.ResponseWriter, r *http.Request) {
	req := adminapi.ImportRequest{Source: "import:" + r.URL.Query().Get("name")}
	if r.URL.Query().Get("name") == "" {
		req.Source = "import:admin"
	}
	if k := r.Header.Get(adminapi.HeaderSealKey); k != "" {
		b, err := base64.StdEncoding.DecodeString(k)
		if err != nil || len(b) < pack.MinSealKey {
			s.adminFail(w, r, &adminapi.Error{Status: http.StatusBadRequest, Code: adminapi.CodeInvalid,
				Message: fmt.Sprintf("%s: want base64 of at least %d bytes", adminapi.HeaderSealKey, pack.MinSealKey)})
			return
		}
		req.Key = b
	}
	if e := r.Header.Get(adminapi.HeaderExpectIdentity); e != "" {
		var id adminapi.Identity
		if err := strictjson.Decode([]byte(e), &id); err != nil {
			s.adminFail(w, r, &adminapi.Error{Status: http.StatusBadRequest, Code: adminapi.CodeInvalid,
				Message: fmt.Sprintf("%s: %v", adminapi.HeaderExpectIdentity, err)})
			return
		}
		p := id.Pack()
		req.Expect = &p
	}
	v, err := s.adminAPI.Import(r.Context(), r.Body, req)
	s.adminReply(w, r, v, err)
}

func (s *Server) handleAdminReceipts(w http.ResponseWriter, r *http.Request) {
	var q adminapi.ReceiptQuery
	if v := r.URL.Query().Get("reason"); v != "" {
		reason, err := pack.ParseReason(v)
		if err != nil {
			s.adminFail(w, r, &adminapi.Error{Status: http.StatusBadRequest, Code: adminapi.CodeInvalid, Message: fmt.Sprintf("reason: %v", err)})
			return
		}
		q.Reason = reason
	}
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			s.adminFail(w, r, &adminapi.Error{Status: http.StatusBadRequest, Code: adminapi.CodeInvalid, Message: fmt.Sprintf("since: %q is not an RFC 3339 time", v)})
			return
		}
		q.Since = t
	}
	v, err := s.adminAPI.Receipts(r.Context(), q)
	s.adminReply(w, r, v, err)
}

func (s *Server) handleAdminReceipt(w http.ResponseWriter, r *http.Request) {
	v, err := s.adminAPI.Receipt(r.Context(), r.PathValue("id"))
	s.adminReply(w, r, v, err)
}

func (s *Server) handleAdminNodes(w http.ResponseWriter, r *http.Request) {
	if s.opts.AdminNodes == nil {
		s.adminFail(w, r, &adminapi.Error{Status: http.StatusNotFound, Code: adminapi.CodeNotFound,
			Message: "this server has no node registry"})
		return
	}
	v, err := s.opts.AdminNodes()
	s.adminReply(w, r, json.RawMessage(v), err)
}

// metricsAccess guards GET /metrics on a server with tenants (--api-keys)
// with the admin endpoint's rule: its store and publish byte counts grow
// only for chunks no tenant stored before, so a tenant reading them could
// tell whether another tenant's prompts hold a prefix it guesses. Without
// tenants it is open, as the one local tenant's own figures.
func (s *Server) metricsAccess(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.keys != nil {
			if err := s.adminAllowed(r); err != nil {
				if s.adminKey != "" {
					w.Header().Set("WWW-Authenticate", `Bearer realm="muser admin"`)
				}
				s.fail(w, r, &apiError{Status: http.StatusUnauthorized, Type: typeAuth, Code: "unauthorized",
					Message: "GET /metrics on a server with --api-keys follows the admin rule: " + err.Error()})
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
