package dashboard

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Paths the dashboard answers.
const (
	// Prefix is where the page's files are served.
	Prefix = "/dashboard/"
	// StatePath is the JSON state the page polls.
	StatePath = "/dashboard/api/state"
)

// Handler serves the page's files under Prefix and the state at
// StatePath (GET only; the server's mux routes the methods).
func (c *Config) Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+StatePath, c.serveState)
	mux.Handle("GET "+Prefix, files)
	return mux
}

// ServeIndex writes the page (for `GET /` from a browser).
func (c *Config) ServeIndex(w http.ResponseWriter, r *http.Request) {
	b, err := static.ReadFile("static/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b)
}

func (c *Config) serveState(w http.ResponseWriter, r *http.Request) {
	if c.Allow != nil {
		if err := c.Allow(r); err != nil {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]string{
				"code": "unauthorized", "message": err.Error()}})
			return
		}
	}
	writeJSON(w, http.StatusOK, c.Snapshot())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// WantsHTML reports whether a request for `/` comes from a browser: its
// Accept header names text/html. Ollama's clients and curl do not, and get
// Ollama's probe text.
func WantsHTML(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(strings.ToLower(v), "text/html") {
			return true
		}
	}
	return false
}
