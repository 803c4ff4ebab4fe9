package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/spf13/pflag"
)

// detokenizeOptions are the flags of `muser detokenize`.
type detokenizeOptions struct {
	model   string
	json    bool
	special bool
}

func (o *detokenizeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.model, "model", "", "GGUF `FILE` whose tokenizer to use (a vocab-only file is enough)")
	fs.BoolVar(&o.json, "json", false, "print the text as a JSON string")
	fs.BoolVar(&o.special, "special", false, "render control tokens (<s>, <|im_end|>, ...) as their text")
}

func newDetokenizeCommand() *command {
	var opts detokenizeOptions
	cmd := &command{
		name:    "detokenize",
		args:    "[ID...]",
		summary: "print the text of token ids, as llama.cpp detokenizes them",
		help: `Turns token ids back into text with the tokenizer of the GGUF file given by
--model, exactly as llama.cpp's llama_detokenize does (SentencePiece's
leading space removed from the first token, byte tokens as their bytes,
and the clean-up of spaces before punctuation where the vocabulary asks for
it), and prints the text followed by a newline, or as a JSON string with
--json. Control tokens render as nothing unless --special is given. As in
llama.cpp, a leading BOS counts as the first token, so the space
SentencePiece puts before the text is then kept: ids from
'muser tokenize --no-bos' come back as the text they came from.

The ids are the arguments, or standard input when there are none; they may
be separated by spaces or commas and enclosed in brackets, so the output of
'muser tokenize --json' can be piped in.

An id that is not a number, or not in the vocabulary, gives exit status 2;
a missing file gives exit status 3.`,
		flags: opts.AddFlags,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if opts.model == "" {
			return usagef(cmd, "--model is required")
		}
		src := strings.Join(args, " ")
		if len(args) == 0 {
			b, err := io.ReadAll(env.stdin)
			if err != nil {
				return fmt.Errorf("read standard input: %w", err)
			}
			src = string(b)
		}
		var ids []int32
		for _, f := range strings.FieldsFunc(src, func(r rune) bool {
			return r == ',' || r == '[' || r == ']' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
		}) {
			id, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				return usagef(cmd, "%q is not a token id", f)
			}
			ids = append(ids, int32(id))
		}
		tok, err := loadTokenizer(opts.model)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() {
				return usagef(cmd, "token id %d is not in the vocabulary of %s (%d tokens)", id, opts.model, tok.VocabSize())
			}
		}
		text, err := tok.DecodeWith(ids, tokenizer.DecodeOptions{RenderSpecial: opts.special})
		if err != nil {
			return err
		}
		if opts.json {
			b, err := json.Marshal(text)
			if err != nil {
				return err
			}
			text = string(b)
		}
		_, err = io.WriteString(env.stdout, text+"\n")
		return err
	}
	return cmd
}
