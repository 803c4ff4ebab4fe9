package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/kvcache"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/serve/adminapi"
	"github.com/muserhq/muser/store"
	"github.com/spf13/pflag"
)

// modelInspectOptions are the flags of `muser model inspect`.
type modelInspectOptions struct {
	json       bool
	noDigest   bool
	arrayItems int
	dflt       bool
	kv         string
	block      int
}

func (o *modelInspectOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print one JSON object instead of text")
	fs.BoolVar(&o.noDigest, "no-digest", false, "skip the weights digest (it reads every byte of tensor data)")
	fs.IntVar(&o.arrayItems, "items", 4, "show at most this many `N` elements of each metadata array")
	fs.BoolVar(&o.dflt, "default", false, "inspect the default model embedded in this binary instead of a FILE")
	fs.StringVar(&o.kv, "kv", "f16", "KV cache element type the identity's kv field is computed for: f16 or f32 (as run's --kv; serve uses f16)")
	fs.IntVar(&o.block, "block-tokens", 0, "block size the identity's kv field is computed for (default: the store's under --home, else 64)")
}

func newModelInspectCommand() *command {
	var opts modelInspectOptions
	cmd := &command{
		name:    "model inspect",
		args:    "FILE | --default",
		summary: "print a GGUF model's metadata, tensors, parameter count and identity fields",
		help: `Parses FILE as GGUF (v2 or v3) without loading its weights into memory and
prints its metadata (long arrays summarised: type, length, first items), the
tensor table (name, type, shape in ggml order, bytes, absolute offset), the
parameter count, the file type, and the pack identity that muser serve and
muser run compute for KV made with this file: all eight fields, and the
identity key that pack inspect prints for packs made with it.

  format    the pack format version of this build
  model     BLAKE3 digest of every tensor's name, type, shape and data
            (infer/gguf WeightsDigest); independent of metadata and layout
  arch      the engine's canonical description of what shapes K and V
            (architecture, layers, heads, head dims, RoPE, norm epsilon)
  tokenizer digest of the vocabulary and its rules (infer/tokenizer)
  template  digest of tokenizer.chat_template (of the empty template when
            absent; infer/gguf ChatTemplateDigest)
  quant     the weight quantization (infer/gguf QuantName): the single type
            of the weight matrices, or mixed:TYPES@DIGEST
  kv        KV element type (--kv), block size and layout; the block size
            is the store's under --home when one exists there (asked of
            the muser server that holds it, while one does; the default,
            64, otherwise), or --block-tokens
  engine    this build's engine and numerics version

Fields that cannot be computed for the file (an architecture the engine
does not support, a vocabulary the tokenizer cannot load, --no-digest) are
listed with the reason; that is not an error.

With --default and no FILE it describes the small model embedded in muser
(infer/defaultmodel; docs/defaultmodel.md), which serve and run use when no
--model is given: its name and SHA-256 first (checked against the recorded
digest), then the same report.

A malformed file fails with an error naming the field at fault and its byte
offset (exit status 1); a missing file gives exit status 3.`,
		flags: opts.AddFlags,
		home:  true,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if opts.arrayItems < 0 {
			return usagef(cmd, "--items must not be negative")
		}
		kv, err := kvcache.ParseDType(opts.kv)
		if err != nil {
			return usagef(cmd, "--kv: %v", err)
		}
		if opts.block < 0 || opts.block > pack.MaxBlockTokens {
			return usagef(cmd, "--block-tokens %d: want 0 (the store's) to %d", opts.block, pack.MaxBlockTokens)
		}
		idOpts := identityOptions{kv: kv, block: opts.block, blockFrom: "--block-tokens", noDigest: opts.noDigest}
		if opts.block == 0 {
			idOpts.block, idOpts.blockFrom = storeBlockTokens(ctx, env.home)
		}
		if opts.dflt {
			if len(args) != 0 {
				return usagef(cmd, "--default takes no FILE argument, got %q", args[0])
			}
			return runModelInspectDefault(env.stdout, opts, idOpts)
		}
		if len(args) != 1 {
			return usagef(cmd, "takes exactly one FILE argument (or --default), got %d", len(args))
		}
		return runModelInspect(env.stdout, args[0], opts, idOpts)
	}
	return cmd
}

// inspectReport is the --json output.
type inspectReport struct {
	Path       string          `json:"path"`
	Embedded   *inspectEmbed   `json:"embedded,omitempty"` // --default only
	Version    uint32          `json:"version"`
	Alignment  int             `json:"alignment"`
	Size       int64           `json:"size"`
	DataOffset int64           `json:"data_offset"`
	Parameters int64           `json:"parameters"`
	FileType   *inspectFT      `json:"file_type"`
	Identity   inspectIdentity `json:"identity"`
	Metadata   []inspectKV     `json:"metadata"`
	Tensors    []inspectTensor `json:"tensors"`
}

// inspectEmbed describes the embedded default model.
type inspectEmbed struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Doc    string `json:"doc"`
}

type inspectFT struct {
	ID   uint32 `json:"id"`
	Name string `json:"name"`
}

// inspectIdentity is the identity part of the report. Digests are hex;
// a field that could not be computed is empty and listed in Missing.
type inspectIdentity struct {
	// Key is the identity key (pack.Identity.Key), only when all eight
	// fields are known.
	Key       string `json:"key,omitempty"`
	Format    uint32 `json:"format"`
	Model     string `json:"model,omitempty"`
	Arch      string `json:"arch,omitempty"`
	Tokenizer string `json:"tokenizer,omitempty"`
	Template  string `json:"template"`
	Quant     string `json:"quant"`
	KV        string `json:"kv,omitempty"`
	Engine    string `json:"engine,omitempty"`
	// BlockTokens and BlockFrom say which block size kv is computed for
	// and where it came from.
	BlockTokens int              `json:"block_tokens"`
	BlockFrom   string           `json:"block_from"`
	Missing     []missingIDField `json:"missing,omitempty"`
	// full is the identity itself, whole only when Missing is empty.
	full pack.Identity
}

// missingIDField is an identity field that could not be computed.
type missingIDField struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// identityOptions are the inputs of the identity beyond the file.
type identityOptions struct {
	kv        kvcache.DType
	block     int
	blockFrom string
	noDigest  bool
}

// storeBlockTokens returns the block size of the store under home and
// where it came from: the store's own when one exists there, read from
// the store opened read-only or, while a muser server holds it, from
// that server's admin endpoint; else store.DefaultBlockTokens (what serve
// and run create a new store with) and why.
func storeBlockTokens(ctx context.Context, home string) (int, string) {
	s, err := store.Open(home, store.Options{ReadOnly: true, MustExist: true})
	if errors.Is(err, store.ErrLocked) {
		n, serr := servedBlockTokens(ctx, home)
		if serr == nil {
			return n, "the store under " + home + ", through the muser server that holds it"
		}
		err = fmt.Errorf("%w; %w", err, serr)
	}
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return store.DefaultBlockTokens, "default (no store under " + home + ")"
		}
		return store.DefaultBlockTokens, fmt.Sprintf("default (the store under %s could not be read: %v)", home, err)
	}
	defer s.Close()
	return s.BlockTokens(), "the store under " + home
}

// servedBlockTokens asks the muser server that holds the store under home
// (found through HOME/serve.json) for the store's block size.
func servedBlockTokens(ctx context.Context, home string) (int, error) {
	c, err := adminapi.Dial(ctx, home)
	if err != nil {
		return 0, err
	}
	st, err := c.Stats(ctx)
	if err != nil {
		return 0, err
	}
	return st.BlockTokens, nil
}

// modelIdentity reports the identity serve and run compute for KV made
// with f, from engine.Identity (the one constructor), field by field, so
// that a field that cannot be computed leaves the others.
func modelIdentity(f *gguf.File, o identityOptions) (inspectIdentity, error) {
	full, err := engine.Identity(f, engine.IdentityOptions{KV: o.kv, BlockTokens: o.block, SkipWeights: o.noDigest})
	id := inspectIdentity{Format: full.Format, Quant: full.Quant, Arch: full.Arch, KV: full.KV, Engine: full.Engine,
		BlockTokens: o.block, BlockFrom: o.blockFrom, full: full}
	var ie *engine.IdentityError
	if err != nil && !errors.As(err, &ie) {
		return id, err
	}
	id.Template = hex.EncodeToString(full.Template[:])
	known := map[string]bool{"model": true, "tokenizer": true}
	if ie != nil {
		for _, fe := range ie.Fields {
			known[fe.Field] = false
			reason := fe.Err.Error()
			if errors.Is(fe.Err, engine.ErrSkipped) {
				reason = "skipped: --no-digest"
			}
			id.Missing = append(id.Missing, missingIDField{Field: fe.Field, Reason: reason})
		}
	}
	if known["model"] {
		id.Model = full.Model.String()
	}
	if known["tokenizer"] {
		id.Tokenizer = full.Tokenizer.String()
	}
	if len(id.Missing) == 0 {
		id.Key = full.Key().String()
	}
	return id, nil
}

type inspectKV struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Len   *int   `json:"len,omitempty"`   // arrays only
	Value any    `json:"value,omitempty"` // scalars
	Head  []any  `json:"head,omitempty"`  // arrays: the first items
}

type inspectTensor struct {
	Name   string  `json:"name"`
	Type   string  `json:"type"`
	Shape  []int64 `json:"shape"`
	Bytes  int64   `json:"bytes"`
	Offset int64   `json:"offset"`
}

func runModelInspect(w io.Writer, path string, opts modelInspectOptions, idOpts identityOptions) error {
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return inspect(w, f, inspectReport{Path: path}, opts, idOpts)
}

// runModelInspectDefault inspects the embedded default model, after
// checking its SHA-256 (defaultmodel.File does).
func runModelInspectDefault(w io.Writer, opts modelInspectOptions, idOpts identityOptions) error {
	f, err := defaultmodel.File()
	if err != nil {
		return err
	}
	defer f.Close()
	return inspect(w, f, inspectReport{
		Path:     "(embedded) infer/defaultmodel/" + defaultmodel.FileName,
		Embedded: &inspectEmbed{Name: defaultmodel.Name, SHA256: defaultmodel.SHA256, Doc: "docs/defaultmodel.md"},
	}, opts, idOpts)
}

// inspect fills rep (whose Path and Embedded are set) from f and prints it.
func inspect(w io.Writer, f *gguf.File, rep inspectReport, opts modelInspectOptions, idOpts identityOptions) error {
	rep.Version, rep.Alignment, rep.Size, rep.DataOffset = f.Version, f.Alignment, f.Size(), f.DataOffset
	for i := range f.Tensors {
		t := &f.Tensors[i]
		rep.Parameters += t.Elements()
		rep.Tensors = append(rep.Tensors, inspectTensor{Name: t.Name, Type: t.Type.String(), Shape: t.Shape, Bytes: t.Size, Offset: t.Offset})
	}
	if f.Meta.Has(gguf.KeyFileType) {
		ft, err := f.Meta.Uint32(gguf.KeyFileType)
		if err != nil {
			return err
		}
		rep.FileType = &inspectFT{ID: ft, Name: gguf.FileTypeName(ft)}
	}
	id, err := modelIdentity(f, idOpts)
	if err != nil {
		return err
	}
	rep.Identity = id
	for _, kv := range f.Meta.All() {
		e := inspectKV{Key: kv.Key, Type: kv.Value.TypeName()}
		if kv.Value.IsArray() {
			n := kv.Value.Len()
			e.Len = &n
			e.Head = []any{}
			for i := 0; i < n && i < opts.arrayItems; i++ {
				e.Head = append(e.Head, jsonScalar(kv.Value.Index(i)))
			}
		} else {
			e.Value = jsonScalar(kv.Value)
		}
		rep.Metadata = append(rep.Metadata, e)
	}

	if opts.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(rep)
	}
	printInspect(w, f, &rep, opts)
	return nil
}

// jsonScalar returns a scalar value for JSON; non-finite floats, which
// JSON cannot hold, become strings.
func jsonScalar(v gguf.Value) any {
	if f, ok := v.AsFloat64(); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return v.Interface()
}

// maxText is the longest string value printed whole in text mode.
const maxText = 80

func summarise(v gguf.Value, items int) string {
	if s, ok := v.AsString(); ok && len(s) > maxText {
		return strconv.Quote(s[:maxText]) + fmt.Sprintf("... (%d bytes)", len(s))
	}
	if v.IsArray() {
		var parts []string
		for i := 0; i < v.Len() && i < items; i++ {
			e := v.Index(i)
			if str, ok := e.AsString(); ok && len(str) > maxText {
				parts = append(parts, strconv.Quote(str[:maxText])+"...")
				continue
			}
			parts = append(parts, e.String())
		}
		if v.Len() > items {
			parts = append(parts, "...")
		}
		return fmt.Sprintf("[%d] [%s]", v.Len(), strings.Join(parts, ", "))
	}
	return v.String()
}

func printInspect(w io.Writer, f *gguf.File, rep *inspectReport, opts modelInspectOptions) {
	if e := rep.Embedded; e != nil {
		fmt.Fprintf(w, "default:     %s, embedded in this binary (see %s)\n", e.Name, e.Doc)
		fmt.Fprintf(w, "sha256:      %s (verified)\n", e.SHA256)
	}
	fmt.Fprintf(w, "file:        %s\n", rep.Path)
	fmt.Fprintf(w, "gguf:        version %d, alignment %d, %d bytes, data at %d\n", rep.Version, rep.Alignment, rep.Size, rep.DataOffset)
	fmt.Fprintf(w, "parameters:  %d in %d tensors\n", rep.Parameters, len(rep.Tensors))
	if rep.FileType != nil {
		fmt.Fprintf(w, "file type:   %s (%d)\n", rep.FileType.Name, rep.FileType.ID)
	} else {
		fmt.Fprintf(w, "file type:   (no %s)\n", gguf.KeyFileType)
	}
	printIdentity(w, f, &rep.Identity)

	fmt.Fprintf(w, "\nmetadata (%d):\n", f.Meta.Len())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, kv := range f.Meta.All() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", kv.Key, kv.Value.TypeName(), summarise(kv.Value, opts.arrayItems))
	}
	tw.Flush()

	fmt.Fprintf(w, "\ntensors (%d):\n", len(rep.Tensors))
	rows := [][]string{{"NAME", "TYPE", "SHAPE", "BYTES", "OFFSET"}}
	for _, t := range rep.Tensors {
		dims := make([]string, len(t.Shape))
		for i, d := range t.Shape {
			dims[i] = strconv.FormatInt(d, 10)
		}
		rows = append(rows, []string{t.Name, t.Type, "[" + strings.Join(dims, " ") + "]",
			strconv.FormatInt(t.Bytes, 10), strconv.FormatInt(t.Offset, 10)})
	}
	width := make([]int, 5)
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	for _, r := range rows {
		// Name, type and shape left-aligned; numbers right-aligned.
		fmt.Fprintf(w, "  %-*s  %-*s  %-*s  %*s  %*s\n", width[0], r[0], width[1], r[1], width[2], r[2], width[3], r[3], width[4], r[4])
	}
}

// printIdentity prints the identity as pack inspect does, with the block
// size's source and the fields that could not be computed.
func printIdentity(w io.Writer, f *gguf.File, id *inspectIdentity) {
	if id.Key != "" {
		fmt.Fprintf(w, "\nidentity     %s\n", id.Key)
	} else {
		fmt.Fprintf(w, "\nidentity     (incomplete: %d of 8 fields could not be computed)\n", len(id.Missing))
	}
	show := func(name, v string, quote bool) {
		if v == "" {
			v = "(not computed, see below)"
		} else if quote {
			v = strconv.Quote(v)
		}
		fmt.Fprintf(w, "  %-10s %s\n", name, v)
	}
	show("format", strconv.FormatUint(uint64(id.Format), 10), false)
	show("model", id.Model, false)
	show("arch", id.Arch, true)
	show("tokenizer", id.Tokenizer, false)
	tmpl := id.Template
	if !f.Meta.Has(gguf.KeyChatTemplate) {
		tmpl += "  (no chat template)"
	}
	show("template", tmpl, false)
	show("quant", id.Quant, true)
	show("kv", id.KV, true)
	show("engine", id.Engine, true)
	fmt.Fprintf(w, "  (kv for block size %d: %s)\n", id.BlockTokens, id.BlockFrom)
	for _, m := range id.Missing {
		fmt.Fprintf(w, "  %s not computed: %s\n", m.Field, m.Reason)
	}
}
