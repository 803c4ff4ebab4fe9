package defaultmodel

import (
	"crypto/sha256"
	_ "embed" // the model file is embedded
	"encoding/hex"
	"fmt"

	"github.com/muserhq/muser/infer/gguf"
)

// The embedded model file. A string, so the bytes in the binary are
// read-only; Bytes hands out copies.
//
//go:embed model.gguf
var data string

const (
	// Name is the model's name: its general.name metadata, and the model
	// id muser reports when it serves the default model.
	Name = "muser-default"

	// FileName is the name of the embedded file in this package's
	// directory.
	FileName = "model.gguf"

	// SHA256 is the hex SHA-256 of the embedded GGUF file.
	SHA256 = "e2924f27e65e0ee1ad5f60c883be389eeee59fe84d129518beb78309fc89d3c9"

	// Size is the size of the embedded GGUF file in bytes.
	Size = 7308896

	// ChatTemplate is the model's tokenizer.chat_template: standard ChatML
	// with no default system prompt. It renders each message as
	// "<|im_start|>{role}\n{content}<|im_end|>\n" and the generation prompt
	// as "<|im_start|>assistant\n".
	ChatTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

// Bytes returns a copy of the embedded GGUF file (Size bytes). Each call
// allocates a new copy, which the caller owns.
func Bytes() []byte { return []byte(data) }

// Verify hashes the embedded file and returns an error wrapping ErrDigest
// if it does not match SHA256.
func Verify() error {
	sum := sha256.Sum256([]byte(data))
	if got := hex.EncodeToString(sum[:]); got != SHA256 {
		return fmt.Errorf("%w: got %s, want %s", ErrDigest, got, SHA256)
	}
	return nil
}

// File verifies the embedded model and parses it with the GGUF reader. The
// returned File reads a private copy of the bytes; it holds no resources,
// so Close is optional.
func File() (*gguf.File, error) {
	if err := Verify(); err != nil {
		return nil, err
	}
	f, err := gguf.Parse(Bytes())
	if err != nil {
		return nil, fmt.Errorf("defaultmodel: parsing the embedded %s: %w", FileName, err)
	}
	return f, nil
}
