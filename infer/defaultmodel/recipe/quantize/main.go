// Command quantize converts the default model's F32 GGUF (written by
// ../train/train.py) to the Q8_0 file muser embeds, with muser's own GGUF
// writer and ggml's reference Q8_0 quantizer (package infer/ggml).
//
// Usage:
//
//	quantize -in model-f32.gguf -out model.gguf
//
// Every two-dimensional F32 tensor (the embedding and all projection
// matrices) becomes Q8_0; one-dimensional tensors (the RMSNorm weights)
// stay F32, as llama.cpp's quantizer leaves them. The metadata is copied in
// order, with general.file_type set to 7 (MOSTLY_Q8_0) and
// general.quantization_version to 2. The output is a pure function of the
// input and is written atomically.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

// llama.cpp's file type for "mostly Q8_0" and the quantization format
// version its quantizer records.
const (
	fileTypeQ8_0        = 7
	quantizationVersion = 2
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "quantize:", err)
		}
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("quantize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "F32 GGUF to read")
	out := fs.String("out", "", "Q8_0 GGUF to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" || fs.NArg() > 0 {
		return errors.New("usage: quantize -in F32.gguf -out Q8_0.gguf")
	}
	f, err := gguf.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := quantize(f)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	return b.WriteFile(*out)
}

// quantize returns a Builder holding f converted to Q8_0.
func quantize(f *gguf.File) (*gguf.Builder, error) {
	b := gguf.NewBuilder()
	for _, kv := range f.Meta.All() {
		b.Set(kv.Key, kv.Value)
	}
	b.SetUint32(gguf.KeyFileType, fileTypeQ8_0)
	b.SetUint32("general.quantization_version", quantizationVersion)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Type != ggml.TypeF32 {
			return nil, fmt.Errorf("tensor %q is %s, want F32", t.Name, t.Type)
		}
		if len(t.Shape) != 2 {
			b.AddTensor(t.Name, t.Type, t.Shape, f.Data(t))
			continue
		}
		vals := make([]float32, t.Elements())
		if err := ggml.Dequantize(ggml.TypeF32, f.Data(t), vals); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		b.AddFloat32(t.Name, ggml.TypeQ8_0, t.Shape, vals)
	}
	// The Builder records its first error; Bytes or WriteFile return it.
	return b, nil
}
