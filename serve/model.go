package serve

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/template"
	"github.com/muserhq/muser/infer/tokenizer"
)

// loadedModel is the served model with everything the routes need about
// it.
type loadedModel struct {
	eng  *engine.Model
	tok  *tokenizer.Tokenizer
	tmpl *template.Template
	// tmplSrc is the model's own chat template text ("" when it has none
	// and ChatML is used).
	tmplSrc    string
	tmplDigest [32]byte
	// id is the model's name in the APIs; aliases are the other names a
	// request may use for it.
	id      string
	aliases map[string]bool
	path    string // the file, or "" for an embedded model
	size    int64
	params  int64
	quant   string
	bos     string // text of BOS and EOS ("" when the vocabulary has none)
	eos     string
}

// newLoadedModel describes m, whose file is f; name overrides the name
// taken from the file.
func newLoadedModel(m *engine.Model, name string) (*loadedModel, error) {
	f := m.File()
	tok, err := tokenizer.FromGGUF(f.Meta)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	src, err := f.Meta.StringOr(gguf.KeyChatTemplate, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gguf.KeyChatTemplate, err)
	}
	lm := &loadedModel{eng: m, tok: tok, tmplSrc: src, tmplDigest: template.Digest(src),
		path: f.Path(), size: f.Size(), quant: gguf.QuantName(f)}
	if src == "" {
		lm.tmpl = template.ChatML()
	} else if lm.tmpl, err = template.Parse(src); err != nil {
		return nil, fmt.Errorf("the model's chat template: %w", err)
	}
	for _, t := range f.Tensors {
		n := int64(1)
		for _, d := range t.Shape {
			n *= d
		}
		lm.params += n
	}
	if b := tok.BOS(); b >= 0 {
		lm.bos = tok.Token(b)
	}
	if e := tok.EOS(); e >= 0 {
		lm.eos = tok.Token(e)
	}
	if name == "" && lm.path != "" {
		name = strings.TrimSuffix(filepath.Base(lm.path), filepath.Ext(lm.path))
	}
	if name == "" {
		name, _ = f.Meta.StringOr("general.name", "")
	}
	if name == "" {
		name = "muser"
	}
	lm.id = name
	lm.aliases = map[string]bool{name: true, name + ":latest": true, "muser": true, "muser:latest": true}
	if lm.path != "" {
		lm.aliases[filepath.Base(lm.path)] = true
	}
	return lm, nil
}

// knows reports whether a request's model field names the served model.
// An empty name means the served model.
func (lm *loadedModel) knows(name string) bool { return name == "" || lm.aliases[name] }

// ollamaName is the model's name in Ollama's API.
// A name that already has a tag (an --alias such as "llama3.2:3b") is
// used as it is.
func (lm *loadedModel) ollamaName() string {
	if strings.Contains(lm.id, ":") {
		return lm.id
	}
	return lm.id + ":latest"
}

// arch returns general.architecture.
func (lm *loadedModel) arch() string { return lm.eng.Config().Arch }

// paramSize renders the parameter count as Ollama does ("494.03M").
func (lm *loadedModel) paramSize() string {
	p := float64(lm.params)
	switch {
	case p >= 1e9:
		return fmt.Sprintf("%.2fB", p/1e9)
	case p >= 1e6:
		return fmt.Sprintf("%.2fM", p/1e6)
	default:
		return fmt.Sprintf("%.2fK", p/1e3)
	}
}
