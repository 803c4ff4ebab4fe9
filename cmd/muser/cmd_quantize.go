package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/muserhq/muser/cmd/muser/internal/progress"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/spf13/pflag"
)

// quantizeOptions are the flags of `muser quantize`.
type quantizeOptions struct {
	typ   string
	force bool
}

func (o *quantizeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.typ, "type", "", "store the weight matrices as `TYPE`: "+quantizeTypeNames())
	fs.BoolVar(&o.force, "force", false, "replace OUT if it exists")
}

// quantizeTypes are the types `muser quantize` writes, each with the
// general.file_type llama.cpp records for a model made of it (enum
// llama_ftype in llama.h). llama.cpp has no file type for "every matrix
// Q4_K"; MOSTLY_Q4_K_S, whose recipe is Q4_K but for a few matrices, is
// the nearest.
var quantizeTypes = []struct {
	typ   ggml.Type
	ftype uint32
}{
	{ggml.TypeNVFP4, 39}, // MOSTLY_NVFP4
	{ggml.TypeQ8_0, 7},   // MOSTLY_Q8_0
	{ggml.TypeQ4_K, 14},  // MOSTLY_Q4_K_S
	{ggml.TypeQ5_0, 8},   // MOSTLY_Q5_0
	{ggml.TypeQ4_0, 2},   // MOSTLY_Q4_0
	{ggml.TypeQ4_1, 3},   // MOSTLY_Q4_1
	{ggml.TypeQ5_1, 9},   // MOSTLY_Q5_1
	{ggml.TypeF16, 1},    // MOSTLY_F16
	{ggml.TypeBF16, 32},  // MOSTLY_BF16
	{ggml.TypeF32, 0},    // ALL_F32
}

// quantizationVersion is the general.quantization_version llama.cpp's
// quantizer writes (GGML_QNT_VERSION).
const quantizationVersion = 2

func quantizeTypeNames() string {
	names := make([]string, len(quantizeTypes))
	for i, q := range quantizeTypes {
		names[i] = q.typ.String()
	}
	return strings.Join(names, ", ")
}

func newQuantizeCommand() *command {
	var opts quantizeOptions
	cmd := &command{
		name:    "quantize",
		args:    "IN OUT",
		summary: "write a copy of a GGUF model with its weight matrices stored as another type",
		help: `Writes OUT, a copy of the GGUF model IN whose weight matrices are stored
as --type (one of ` + quantizeTypeNames() + `).

The weight matrices are the tensors whose names end in "weight" but not
"_norm.weight" and which have at least two dimensions larger than 1
(token_embd and output included). Norms, biases and other vectors keep
their type and bytes; so does a matrix already of its target type. Every
other matrix is decoded to float32 (from any type muser decodes: F32, F16,
BF16, the legacy and K quants, NVFP4) and encoded with ggml's reference
quantizer, so OUT is a pure function of IN and --type, whatever the
machine or thread count. A matrix whose rows are not a whole number of the
type's blocks falls back as llama.cpp's quantizer does: Q4_K to Q5_0 (rows
not a multiple of 256), NVFP4 to Q8_0 (not a multiple of 64; llama.cpp
defines no NVFP4 fallback), and to F16 when that does not fit either.

Metadata is copied, with general.file_type set to llama.cpp's value for
the type (NVFP4 39, Q8_0 7, Q4_K 14 = MOSTLY_Q4_K_S, Q5_0 8, Q4_0 2,
Q4_1 3, Q5_1 9, F16 1, BF16 32, F32 0) and general.quantization_version
to 2. Tensors keep their order and the file its alignment.

OUT is written atomically: a temporary file in its directory, fsync,
a check that it parses, then a hard link to OUT (a rename with --force).
On any failure or interrupt OUT is left as it was. An existing OUT is
replaced only with --force; without it, an OUT another process creates
while the model is written is kept too, and the run fails as for an OUT
that existed before. Progress goes to standard error when it is a
terminal; a summary goes to standard output.

A missing IN gives exit status 3; a bad or missing --type exit status 2;
a malformed IN, a tensor that cannot be decoded, an existing OUT without
--force or a failed write exit status 1.`,
		flags: opts.AddFlags,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) != 2 {
			return usagef(cmd, "takes IN and OUT, got %d arguments", len(args))
		}
		if opts.typ == "" {
			return usagef(cmd, "--type is required (%s)", quantizeTypeNames())
		}
		typ, err := ggml.ParseType(opts.typ)
		ftype, ok := uint32(0), false
		if err == nil {
			for _, q := range quantizeTypes {
				if q.typ == typ {
					ftype, ok = q.ftype, true
				}
			}
		}
		if !ok {
			return usagef(cmd, "--type %q: want one of %s", opts.typ, quantizeTypeNames())
		}
		return runQuantize(ctx, env, args[0], args[1], typ, ftype, opts.force)
	}
	return cmd
}

// quantizeTensor is one tensor's plan: its target type, and whether its
// bytes are copied or converted.
type quantizeTensor struct {
	info *gguf.TensorInfo
	typ  ggml.Type
	copy bool
}

// isWeightMatrix reports whether t is one of the tensors `muser quantize`
// converts: a name ending in "weight" but not "_norm.weight" (llama.cpp's
// rule), and at least two dimensions larger than 1 (gguf.QuantName's
// definition of a matrix).
func isWeightMatrix(t *gguf.TensorInfo) bool {
	if !strings.HasSuffix(t.Name, "weight") || strings.HasSuffix(t.Name, "_norm.weight") {
		return false
	}
	big := 0
	for _, d := range t.Shape {
		if d > 1 {
			big++
		}
	}
	return big >= 2
}

// planQuantize decides every tensor's type and checks that each tensor to
// convert can be decoded, naming the file and tensor at fault.
func planQuantize(in string, f *gguf.File, typ ggml.Type) ([]quantizeTensor, error) {
	plan := make([]quantizeTensor, len(f.Tensors))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		p := quantizeTensor{info: t, typ: t.Type, copy: true}
		if isWeightMatrix(t) {
			p.typ = ggml.Fallback(typ, int(t.Shape[0]))
			p.copy = p.typ == t.Type
			if !p.copy && !t.Type.CanDequantize() {
				return nil, fmt.Errorf("%s: tensor %q: type %v cannot be decoded to make %v", in, t.Name, t.Type, p.typ)
			}
		}
		plan[i] = p
	}
	return plan, nil
}

// quantizeOutputExists is the refusal of an OUT that exists, without
// --force: found before the work starts or when the finished file is
// published.
func quantizeOutputExists(out string) error {
	return fmt.Errorf("%s exists; --force replaces it", out)
}

// quantizeBeforeWrite is called after the check that OUT does not exist
// and before OUT is written; tests set it to create OUT in between, as
// another process may.
var quantizeBeforeWrite = func() {}

func runQuantize(ctx context.Context, env *cliEnv, in, out string, typ ggml.Type, ftype uint32, force bool) error {
	f, err := gguf.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	if !force {
		// A fast, clear refusal; the write checks again as it publishes.
		if _, err := os.Lstat(out); err == nil {
			return quantizeOutputExists(out)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	plan, err := planQuantize(in, f, typ)
	if err != nil {
		return err
	}

	b := gguf.NewBuilder()
	for _, kv := range f.Meta.All() {
		b.Set(kv.Key, kv.Value)
	}
	b.SetUint32(gguf.KeyFileType, ftype)
	b.SetUint32("general.quantization_version", quantizationVersion)
	showProgress := progress.IsTerminal(env.stderr)
	for i, p := range plan {
		t := p.info
		if p.copy {
			b.AddTensor(t.Name, t.Type, t.Shape, f.Data(t))
			continue
		}
		b.AddTensorFunc(t.Name, p.typ, t.Shape, func(dst []byte) error {
			if showProgress {
				fmt.Fprintf(env.stderr, "\rquantize: %d/%d %-40s", i+1, len(plan), t.Name)
			}
			return convertTensor(ctx, f.Data(t), t.Type, dst, p.typ, int(t.Shape[0]))
		})
	}
	quantizeBeforeWrite()
	if force {
		err = b.WriteFile(out)
	} else {
		// OUT may have been created since the check: publish without
		// replacing it.
		err = b.WriteNewFile(out)
	}
	if showProgress {
		fmt.Fprintln(env.stderr)
	}
	if err != nil {
		switch {
		case errors.Is(err, context.Canceled):
			return err
		case !force && errors.Is(err, fs.ErrExist):
			return quantizeOutputExists(out)
		}
		return &outputError{path: out, err: err}
	}
	printQuantizeSummary(env.stdout, out, f, plan)
	return nil
}

// convertTensor decodes src (rows of cols elements of type from) and
// encodes it as type to into dst, rows split among goroutines. Every row
// is converted on its own, so the bytes do not depend on the split.
func convertTensor(ctx context.Context, src []byte, from ggml.Type, dst []byte, to ggml.Type, cols int) error {
	srcRow, err := from.RowSize(cols)
	if err != nil {
		return err
	}
	dstRow, err := to.RowSize(cols)
	if err != nil {
		return err
	}
	rows := len(src) / srcRow
	// Chunks of about a million values: small enough to spread a matrix
	// over the workers, large enough to keep scheduling cheap.
	per := max(1, (1<<20)/cols)
	chunks := (rows + per - 1) / per
	workers := min(runtime.GOMAXPROCS(0), chunks)
	var (
		next     int
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]float32, cols)
			for {
				mu.Lock()
				c := next
				next++
				stop := firstErr != nil
				mu.Unlock()
				if c >= chunks || stop {
					return
				}
				if err := ctx.Err(); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				for r := c * per; r < min(rows, (c+1)*per); r++ {
					err := ggml.Dequantize(from, src[r*srcRow:(r+1)*srcRow], buf)
					if err == nil {
						err = ggml.Quantize(to, buf, dst[r*dstRow:(r+1)*dstRow])
					}
					if err != nil {
						mu.Lock()
						firstErr = fmt.Errorf("row %d: %w", r, err)
						mu.Unlock()
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// printQuantizeSummary reports what was written: tensors by resulting
// type, and sizes.
func printQuantizeSummary(w io.Writer, out string, f *gguf.File, plan []quantizeTensor) {
	byType := map[ggml.Type]int{}
	converted := 0
	for _, p := range plan {
		if isWeightMatrix(p.info) {
			byType[p.typ]++
			if !p.copy {
				converted++
			}
		}
	}
	types := make([]ggml.Type, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool { return types[i] < types[j] })
	var parts []string
	for _, t := range types {
		parts = append(parts, fmt.Sprintf("%d %v", byType[t], t))
	}
	size := int64(-1)
	if st, err := os.Stat(out); err == nil {
		size = st.Size()
	}
	fmt.Fprintf(w, "%s: %d tensors; weight matrices: %s (%d converted); %d bytes, from %d\n",
		out, len(plan), strings.Join(parts, ", "), converted, size, f.Size())
}
