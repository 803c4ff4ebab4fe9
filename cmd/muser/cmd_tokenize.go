package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/spf13/pflag"
)

// tokenizeOptions are the flags of `muser tokenize`.
type tokenizeOptions struct {
	model   string
	json    bool
	noBOS   bool
	special bool
}

func (o *tokenizeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.model, "model", "", "GGUF `FILE` whose tokenizer to use (a vocab-only file is enough)")
	fs.BoolVar(&o.json, "json", false, "print a JSON array instead of space-separated ids")
	fs.BoolVar(&o.noBOS, "no-bos", false, "do not add the BOS and EOS tokens the vocabulary asks for")
	fs.BoolVar(&o.special, "special", false, "recognise the text of control tokens (<s>, <|im_start|>, ...) as those tokens")
}

func newTokenizeCommand() *command {
	var opts tokenizeOptions
	cmd := &command{
		name:    "tokenize",
		args:    "[TEXT]",
		summary: "print the token ids of a text, as llama.cpp tokenizes it",
		help: `Tokenizes TEXT (or standard input, when TEXT is absent) with the tokenizer
of the GGUF file given by --model, exactly as llama.cpp's llama_tokenize
does, and prints the ids separated by spaces, or as a JSON array with --json.

By default BOS and EOS are added where the vocabulary says so
(tokenizer.ggml.add_bos_token / add_eos_token, or llama.cpp's default for
the model type), as llama_tokenize with add_special; --no-bos adds neither.
Control-token text such as <s> or <|im_start|> is tokenized as plain text
unless --special is given; user-defined tokens are always recognised.

A missing file gives exit status 3; a malformed file or an unsupported
tokenizer gives exit status 1.`,
		flags: opts.AddFlags,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if opts.model == "" {
			return usagef(cmd, "--model is required")
		}
		if len(args) > 1 {
			return usagef(cmd, "takes at most one TEXT argument, got %d (quote the text)", len(args))
		}
		var text string
		if len(args) == 1 {
			text = args[0]
		} else {
			b, err := io.ReadAll(env.stdin)
			if err != nil {
				return fmt.Errorf("read standard input: %w", err)
			}
			text = string(b)
		}
		tok, err := loadTokenizer(opts.model)
		if err != nil {
			return err
		}
		ids, err := tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: !opts.noBOS, ParseSpecial: opts.special})
		if err != nil {
			return err
		}
		return printIDs(env.stdout, ids, opts.json)
	}
	return cmd
}

// loadTokenizer reads the tokenizer of the GGUF file at path.
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f.Meta)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tok, nil
}

func printIDs(w io.Writer, ids []int32, asJSON bool) error {
	var b bytes.Buffer
	if asJSON {
		if ids == nil {
			ids = []int32{}
		}
		out, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		b.Write(out)
	} else {
		for i, id := range ids {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.FormatInt(int64(id), 10))
		}
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}
