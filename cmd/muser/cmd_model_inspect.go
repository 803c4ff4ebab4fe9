package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/spf13/pflag"
)

// modelInspectOptions are the flags of `muser model inspect`.
type modelInspectOptions struct {
	json       bool
	noDigest   bool
	arrayItems int
	dflt       bool
}

func (o *modelInspectOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print one JSON object instead of text")
	fs.BoolVar(&o.noDigest, "no-digest", false, "skip the weights digest (it reads every byte of tensor data)")
	fs.IntVar(&o.arrayItems, "items", 4, "show at most this many `N` elements of each metadata array")
	fs.BoolVar(&o.dflt, "default", false, "inspect the default model embedded in this binary instead of a FILE")
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
parameter count, the file type, and the pack identity fields that depend on
the file alone:

  model     BLAKE3 digest of every tensor's name, type, shape and data
            (infer/gguf WeightsDigest); independent of metadata and layout
  quant     the weight quantization (infer/gguf QuantName): the single type
            of the weight matrices, or mixed:TYPES@DIGEST
  template  digest of tokenizer.chat_template (of the empty template when
            absent; infer/gguf ChatTemplateDigest)

The arch, tokenizer, kv and engine fields depend on the engine that loads
the model and are not printed here.

With --default and no FILE it describes the small model embedded in muser
(infer/defaultmodel; docs/defaultmodel.md), which serve and run use when no
--model is given: its name and SHA-256 first (checked against the recorded
digest), then the same report.

A malformed file fails with an error naming the field at fault and its byte
offset (exit status 1); a missing file gives exit status 3.`,
		flags: opts.AddFlags,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if opts.arrayItems < 0 {
			return usagef(cmd, "--items must not be negative")
		}
		if opts.dflt {
			if len(args) != 0 {
				return usagef(cmd, "--default takes no FILE argument, got %q", args[0])
			}
			return runModelInspectDefault(env.stdout, opts)
		}
		if len(args) != 1 {
			return usagef(cmd, "takes exactly one FILE argument (or --default), got %d", len(args))
		}
		return runModelInspect(env.stdout, args[0], opts)
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

type inspectIdentity struct {
	Model    string `json:"model,omitempty"`
	Quant    string `json:"quant"`
	Template string `json:"template"`
	Note     string `json:"note"`
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

const identityNote = "arch, tokenizer, kv and engine are computed by the engine that loads the model"

func runModelInspect(w io.Writer, path string, opts modelInspectOptions) error {
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return inspect(w, f, inspectReport{Path: path}, opts)
}

// runModelInspectDefault inspects the embedded default model, after
// checking its SHA-256 (defaultmodel.File does).
func runModelInspectDefault(w io.Writer, opts modelInspectOptions) error {
	f, err := defaultmodel.File()
	if err != nil {
		return err
	}
	defer f.Close()
	return inspect(w, f, inspectReport{
		Path:     "(embedded) infer/defaultmodel/" + defaultmodel.FileName,
		Embedded: &inspectEmbed{Name: defaultmodel.Name, SHA256: defaultmodel.SHA256, Doc: "docs/defaultmodel.md"},
	}, opts)
}

// inspect fills rep (whose Path and Embedded are set) from f and prints it.
func inspect(w io.Writer, f *gguf.File, rep inspectReport, opts modelInspectOptions) error {
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
	if !opts.noDigest {
		d := gguf.WeightsDigest(f)
		rep.Identity.Model = hex.EncodeToString(d[:])
	}
	rep.Identity.Quant = gguf.QuantName(f)
	td, err := gguf.ChatTemplateDigest(f)
	if err != nil {
		return err
	}
	rep.Identity.Template = hex.EncodeToString(td[:])
	rep.Identity.Note = identityNote
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
	fmt.Fprintln(w, "\nidentity:")
	if rep.Identity.Model != "" {
		fmt.Fprintf(w, "  model      %s\n", rep.Identity.Model)
	} else {
		fmt.Fprintf(w, "  model      (skipped: --no-digest)\n")
	}
	fmt.Fprintf(w, "  quant      %s\n", rep.Identity.Quant)
	tmpl := ""
	if !f.Meta.Has(gguf.KeyChatTemplate) {
		tmpl = "  (no chat template)"
	}
	fmt.Fprintf(w, "  template   %s%s\n", rep.Identity.Template, tmpl)
	fmt.Fprintf(w, "  (%s)\n", identityNote)

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
