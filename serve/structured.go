package serve

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/muserhq/muser/infer/grammar"
)

// jsonSchemaFormat is response_format.json_schema.
type jsonSchemaFormat struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// responseFormatGrammar turns response_format into a compiled grammar,
// nil for plain text. Besides OpenAI's forms it accepts llama-server's
// {"type": "json_object", "schema": {...}}.
func (s *Server) responseFormatGrammar(rf *responseFormat) (*grammar.Compiled, *apiError) {
	if rf == nil {
		return nil, nil
	}
	switch rf.Type {
	case "", "text":
		if isSet(rf.JSONSchema) || isSet(rf.Schema) {
			return nil, badRequest("invalid_value", "response_format.type", "response_format.type is %q; json_schema and schema need type json_schema or json_object", rf.Type)
		}
		return nil, nil
	case "json_object":
		if isSet(rf.Schema) {
			return s.schemaGrammar(rf.Schema, false, "response_format.schema")
		}
		return s.compileGrammar(grammar.JSONObject(), "response_format")
	case "json_schema":
		if !isSet(rf.JSONSchema) {
			return nil, badRequest("invalid_value", "response_format.json_schema", "response_format.json_schema is missing; type json_schema needs it")
		}
		var f jsonSchemaFormat
		if err := decodeStrict(rf.JSONSchema, &f); err != nil {
			return nil, badRequest("invalid_value", "response_format.json_schema", "response_format.json_schema: %v", err)
		}
		if !validSchemaName(f.Name) {
			return nil, badRequest("invalid_value", "response_format.json_schema.name", "response_format.json_schema.name is %q; want 1 to 64 of a-z, A-Z, 0-9, _ and -", f.Name)
		}
		if !isSet(f.Schema) {
			return s.compileGrammar(grammar.JSONObject(), "response_format.json_schema")
		}
		return s.schemaGrammar(f.Schema, f.Strict != nil && *f.Strict, "response_format.json_schema.schema")
	}
	return nil, badRequest("invalid_value", "response_format.type", "response_format.type is %q; want text, json_object or json_schema", rf.Type)
}

func validSchemaName(n string) bool {
	if len(n) == 0 || len(n) > 64 {
		return false
	}
	for _, c := range []byte(n) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// schemaGrammar compiles a JSON schema; param names the field for errors.
func (s *Server) schemaGrammar(schema json.RawMessage, strict bool, param string) (*grammar.Compiled, *apiError) {
	g, err := grammar.FromSchema(schema, grammar.SchemaOptions{Strict: strict})
	if err != nil {
		return nil, badRequest("invalid_value", param, "%s: %v", param, err)
	}
	return s.compileGrammar(g, param)
}

// gbnfGrammar compiles a GBNF grammar; param names the field for errors.
func (s *Server) gbnfGrammar(src, param string) (*grammar.Compiled, *apiError) {
	g, err := grammar.Parse(src)
	if err != nil {
		return nil, badRequest("invalid_value", param, "%s: %v", param, err)
	}
	return s.compileGrammar(g, param)
}

// ollamaFormat turns Ollama's format ("json", a JSON schema, "" or null)
// into a compiled grammar, nil for none.
func (s *Server) ollamaFormat(raw json.RawMessage) (*grammar.Compiled, *apiError) {
	if !isSet(raw) {
		return nil, nil
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		switch str {
		case "":
			return nil, nil
		case "json":
			return s.compileGrammar(grammar.JSONObject(), "format")
		}
		return nil, badRequest("invalid_value", "format", "format is %q; want \"json\" or a JSON schema object", str)
	}
	if strings.TrimSpace(string(raw))[0] != '{' {
		return nil, badRequest("invalid_value", "format", "format must be \"json\" or a JSON schema object")
	}
	return s.schemaGrammar(raw, false, "format")
}

// grammarCache holds a server's compiled grammars by grammar text, so
// that repeated formats (json_object, a client's fixed schema) share their
// compiled states and allowed-token sets across requests. A compiled
// grammar whose states near their bounds (Worn) is replaced by a fresh one
// for new requests. The cache belongs to one server (one vocabulary) and
// goes with it.
type grammarCache struct {
	mu    sync.Mutex
	m     map[string]*grammar.Compiled
	order []string
}

// maxCompiled bounds a grammarCache; the oldest entry goes first.
const maxCompiled = 32

// get returns the cached grammar for src unless it is worn.
func (gc *grammarCache) get(src string) (*grammar.Compiled, bool) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	c, ok := gc.m[src]
	return c, ok && !c.Worn()
}

// put caches c for src, replacing a worn entry (running matchers keep the
// old one) and evicting the oldest beyond maxCompiled.
func (gc *grammarCache) put(src string, c *grammar.Compiled) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.m == nil {
		gc.m = map[string]*grammar.Compiled{}
	}
	if old, ok := gc.m[src]; ok {
		if old.Worn() {
			gc.m[src] = c
		}
		return
	}
	if len(gc.order) >= maxCompiled {
		delete(gc.m, gc.order[0])
		gc.order = gc.order[1:]
	}
	gc.m[src] = c
	gc.order = append(gc.order, src)
}

func (s *Server) compileGrammar(g *grammar.Grammar, param string) (*grammar.Compiled, *apiError) {
	src := g.String()
	if c, ok := s.grammars.get(src); ok {
		return c, nil
	}
	c, err := grammar.Compile(g, s.model.tok)
	if err != nil {
		if errors.Is(err, grammar.ErrInvalid) || errors.Is(err, grammar.ErrTooLarge) {
			return nil, badRequest("invalid_value", param, "%s: %v", param, err)
		}
		return nil, &apiError{Status: 500, Type: typeServer, Code: "internal_error", Message: err.Error()}
	}
	s.grammars.put(src, c)
	return c, nil
}
