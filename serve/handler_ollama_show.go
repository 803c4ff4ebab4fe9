package serve

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
)

// ollamaShowRequest is Ollama's POST /api/show.
type ollamaShowRequest struct {
	Model   string          `json:"model"`
	Name    string          `json:"name"` // the older name of model
	Verbose bool            `json:"verbose"`
	System  string          `json:"system"`
	Options json.RawMessage `json:"options"`
	// Known and not supported yet.
	Template string `json:"template"`
}

// handleOllamaShow is Ollama's POST /api/show: the model's template,
// parameters and metadata.
func (s *Server) handleOllamaShow(w http.ResponseWriter, r *http.Request) {
	var q ollamaShowRequest
	if !s.decode(w, r, &q) {
		return
	}
	name := q.Model
	if name == "" {
		name = q.Name
	}
	switch {
	case name == "":
		s.fail(w, r, badRequest("invalid_value", "model", "model is required"))
		return
	case !s.model.knows(name):
		s.fail(w, r, &apiError{Status: 404, Type: typeNotFound, Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("model '%s' not found", name)})
		return
	case q.Template != "":
		s.fail(w, r, unsupported("template", "template overrides are not supported yet"))
		return
	}
	f := s.model.eng.File()
	info := map[string]any{}
	for _, kv := range f.Meta.All() {
		if kv.Value.IsArray() && !q.Verbose {
			continue // vocabularies are large; verbose shows them
		}
		info[kv.Key] = finiteJSON(kv.Value.Interface())
	}
	info["general.parameter_count"] = s.model.params
	params := "temperature 0.8\ntop_k 40\ntop_p 0.9\nrepeat_penalty 1.1\nrepeat_last_n 64\n"
	if s.model.eos != "" {
		params += fmt.Sprintf("stop %q\n", s.model.eos)
	}
	from := s.model.path
	if from == "" {
		from = s.model.id + " (embedded)"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"license":      "",
		"modelfile":    fmt.Sprintf("# Modelfile of the model muser serves\nFROM %s\nTEMPLATE \"\"\"%s\"\"\"\n", from, s.model.tmpl.Source()),
		"parameters":   strings.TrimSuffix(params, "\n"),
		"template":     s.model.tmpl.Source(),
		"system":       "",
		"details":      s.ollamaDetails(),
		"model_info":   info,
		"capabilities": s.ollamaCapabilities(),
		"modified_at":  s.modifiedAt(),
	})
}

// ollamaCapabilities are the model's capabilities in Ollama's words:
// "completion", and "tools" when /api/chat takes tools, that is when the
// chat template has a tool-call format muser knows (requestTools).
func (s *Server) ollamaCapabilities() []string {
	caps := []string{"completion"}
	if detectToolFormat(s.model.tmpl.Source()) != toolFormatNone {
		caps = append(caps, "tools")
	}
	return caps
}

// finiteJSON returns v, a metadata value (gguf.Value.Interface), with
// every float JSON cannot hold (NaN, ±Inf), alone or in an array, written
// as its text: encoding/json refuses them, which would cut the answer
// short after its status.
func finiteJSON(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprint(x)
		}
	case float32:
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprint(x)
		}
	case []any:
		for i := range x {
			x[i] = finiteJSON(x[i])
		}
	}
	return v
}
