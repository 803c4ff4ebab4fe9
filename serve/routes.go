package serve

import (
	"fmt"
	"net/http"

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
	mux.HandleFunc("/", s.handleNotFound)
	return s.middleware(mux)
}

// knownPaths maps each path to its method, for 405 answers.
var knownPaths = map[string]string{
	"/v1/chat/completions": "POST", "/v1/completions": "POST", "/v1/models": "GET",
	"/completion": "POST", "/tokenize": "POST", "/detokenize": "POST", "/props": "GET", "/health": "GET", "/slots": "GET",
	"/api/generate": "POST", "/api/chat": "POST", "/api/tags": "GET", "/api/show": "POST", "/api/version": "GET",
	"/metrics": "GET",
	// Embeddings (embed.go).
	"/v1/embeddings": "POST", "/embedding": "POST", "/embeddings": "POST", "/api/embed": "POST", "/api/embeddings": "POST",
	"/api/ps": "GET", "/apply-template": "POST", "/infill": "POST",
	// The dashboard.
	"/": "GET", "/dashboard/api/state": "GET",
	"/v1/responses": "POST",
}

func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	if m, ok := knownPaths[r.URL.Path]; ok {
		w.Header().Set("Allow", m)
		s.fail(w, r, &apiError{Status: http.StatusMethodNotAllowed, Type: typeInvalid, Code: "method_not_allowed",
			Message: fmt.Sprintf("%s %s: this route takes %s", r.Method, r.URL.Path, m)})
		return
	}
	s.fail(w, r, &apiError{Status: http.StatusNotFound, Type: typeNotFound, Code: "not_found",
		Message: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)})
}
