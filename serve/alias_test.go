package serve

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestAlias(t *testing.T) {
	tests := []struct {
		alias, ollama string
		accepted      []string
	}{
		{"gpt-4o-mini", "gpt-4o-mini:latest", []string{"gpt-4o-mini", "gpt-4o-mini:latest", "stories260K", "stories260K:latest", "muser", ""}},
		{"llama3.2:3b", "llama3.2:3b", []string{"llama3.2:3b", "stories260K"}},
		{"qwen:latest", "qwen:latest", []string{"qwen:latest", "qwen"}},
	}
	for _, tc := range tests {
		t.Run(tc.alias, func(t *testing.T) {
			ts := startServer(t, func(o *Options) { o.Alias = tc.alias })
			var models struct {
				Data []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			_, body := ts.do(t, http.MethodGet, "/v1/models", "")
			if err := json.Unmarshal(body, &models); err != nil || len(models.Data) != 1 || models.Data[0].ID != tc.alias {
				t.Fatalf("/v1/models: got %s, want the id %q", body, tc.alias)
			}
			var tags struct {
				Models []struct {
					Name string `json:"name"`
				} `json:"models"`
			}
			_, body = ts.do(t, http.MethodGet, "/api/tags", "")
			if err := json.Unmarshal(body, &tags); err != nil || tags.Models[0].Name != tc.ollama {
				t.Fatalf("/api/tags: got %s, want the name %q", body, tc.ollama)
			}
			for _, name := range tc.accepted {
				var r struct {
					Model string `json:"model"`
				}
				ts.postJSON(t, "/v1/completions", map[string]any{"model": name, "prompt": "Once", "max_tokens": 2}, &r)
				if r.Model != tc.alias {
					t.Errorf("model %q: the answer names %q, want %q", name, r.Model, tc.alias)
				}
			}
			resp, body := ts.post(t, "/v1/completions", `{"model": "gpt-5", "prompt": "x", "max_tokens": 1}`)
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), tc.alias) {
				t.Errorf("another name: got %d %s, want 404 naming %q", resp.StatusCode, body, tc.alias)
			}
		})
	}
	for _, bad := range []string{"has space", "tab\there", strings.Repeat("x", 300), "nl\n"} {
		needModel(t)
		_, err := New(Options{ModelPath: modelPath, Home: t.TempDir(), StoreNoSync: true, Alias: bad})
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != "--alias" {
			t.Errorf("alias %q: got %v, want an *OptionError naming --alias", bad, err)
		}
	}
}

func TestOllamaPs(t *testing.T) {
	ts := startServer(t, nil)
	var ps struct {
		Models []struct {
			Name, Model, Digest string
			Size                int64
			SizeVRAM            int64     `json:"size_vram"`
			ExpiresAt           time.Time `json:"expires_at"`
			Details             map[string]any
			ContextLength       int `json:"context_length"`
		} `json:"models"`
	}
	resp, body := ts.do(t, http.MethodGet, "/api/ps", "")
	if resp.StatusCode != 200 {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &ps); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	if len(ps.Models) != 1 {
		t.Fatalf("got %d models, want 1", len(ps.Models))
	}
	m := ps.Models[0]
	switch {
	case m.Name != "stories260K:latest" || m.Model != m.Name:
		t.Errorf("name %q model %q, want stories260K:latest", m.Name, m.Model)
	case m.Digest != ts.s.Identity().Model.String():
		t.Errorf("digest %q, want the weights digest %q", m.Digest, ts.s.Identity().Model.String())
	case m.Size != ts.s.model.size || m.Size <= 0:
		t.Errorf("size %d, want the file's %d", m.Size, ts.s.model.size)
	case m.SizeVRAM != 0:
		t.Errorf("size_vram %d on the CPU, want 0", m.SizeVRAM)
	case m.ExpiresAt.Before(time.Now().AddDate(100, 0, 0)):
		t.Errorf("expires_at %v, want the far future (loaded for the server's life)", m.ExpiresAt)
	case m.Details["format"] != "gguf" || m.Details["family"] != "llama":
		t.Errorf("details %v, want format gguf, family llama", m.Details)
	case m.ContextLength != 512:
		t.Errorf("context_length %d, want 512", m.ContextLength)
	}
}
