package serve

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/muserhq/muser/serve/dashboard"
)

// routes registers every route, one handler per file, behind the
// middleware.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// OpenAI.
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("POST /v1/completions", s.handleCompletions)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /v1/models/{id...}", s.handleModel)
	mux.HandleFunc("POST /v1/embeddings", s.handleEmbeddings)
	mux.HandleFunc("POST /v1/responses", s.handleResponses)
	mux.HandleFunc("GET /v1/responses/{id}", s.handleGetResponse)
	mux.HandleFunc("DELETE /v1/responses/{id}", s.handleDeleteResponse)
	// llama.cpp.
	mux.HandleFunc("POST /completion", s.handleLlamaCompletion)
	mux.HandleFunc("POST /tokenize", s.handleTokenize)
	mux.HandleFunc("POST /detokenize", s.handleDetokenize)
	mux.HandleFunc("GET /props", s.handleProps)
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("GET /slots", s.handleSlots)
	mux.HandleFunc("POST /embedding", s.handleLlamaEmbedding)
	mux.HandleFunc("POST /embeddings", s.handleLlamaEmbedding)
	mux.HandleFunc("POST /apply-template", s.handleApplyTemplate)
	mux.HandleFunc("POST /infill", s.handleInfill)
	mux.HandleFunc("POST /slots/{id}", s.handleSlotAction)
	// Ollama.
	mux.HandleFunc("POST /api/generate", s.handleOllamaGenerate)
	mux.HandleFunc("POST /api/chat", s.handleOllamaChat)
	mux.HandleFunc("GET /api/tags", s.handleOllamaTags)
	mux.HandleFunc("POST /api/show", s.handleOllamaShow)
	mux.HandleFunc("GET /api/version", s.handleOllamaVersion)
	mux.HandleFunc("POST /api/embed", s.handleOllamaEmbed)
	mux.HandleFunc("POST /api/embeddings", s.handleOllamaEmbeddings)
	mux.HandleFunc("GET /api/ps", s.handleOllamaPs)
	// Prometheus.
	mux.Handle("GET /metrics", s.metricsAccess(s.metrics.handler()))
	// Operators: the store's admin endpoint (handler_admin.go).
	s.adminRoutes(mux)
	// The dashboard (serve/dashboard) at `/` for a browser, Ollama's probe
	// text for other clients.
	mux.HandleFunc("GET /{$}", s.handleRoot)
	mux.Handle("GET "+dashboard.Prefix, s.dash.Handler())
	// Anything else: 404 or 405 in the route family's error shape.
	mux.HandleFunc("/", s.notFound(mux))
	return s.middleware(mux)
}

// routeMethods are the methods routes are registered for (a GET route
// also answers HEAD).
var routeMethods = []string{http.MethodGet, http.MethodPost, http.MethodDelete}

// notFound answers a request no route took: 405 with an Allow header when
// a route of mux has its path under another method (path parameters
// included: /slots/{id}, /v1/models/{id...}), else 404. The catch-all "/"
// itself is no route.
func (s *Server) notFound(mux *http.ServeMux) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if allow := allowedMethods(mux, r); len(allow) > 0 {
			m := strings.Join(allow, ", ")
			w.Header().Set("Allow", m)
			s.fail(w, r, &apiError{Status: http.StatusMethodNotAllowed, Type: typeInvalid, Code: "method_not_allowed",
				Message: fmt.Sprintf("%s %s: this route takes %s", r.Method, r.URL.Path, m)})
			return
		}
		s.fail(w, r, &apiError{Status: http.StatusNotFound, Type: typeNotFound, Code: "not_found",
			Message: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)})
	}
}

// allowedMethods returns the methods other than r's for which mux has a
// route (not the catch-all "/") at r's path.
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range routeMethods {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			out = append(out, m)
		}
	}
	return out
}
