package gguf

import (
	"encoding/binary"
	"encoding/hex"
	"io"
	"sort"
	"strings"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/internal/b3"
	"github.com/zeebo/blake3"
)

// Domain strings separate muser's digests from each other and from any
// other use of BLAKE3. Changing an encoding means a new domain string.
const (
	weightsDomain  = "muser/gguf/weights/v1"
	templateDomain = "muser/gguf/chat-template/v1"
	quantDomain    = "muser/gguf/quant-mix/v1"
)

// KeyChatTemplate is the metadata key of the chat template.
const KeyChatTemplate = "tokenizer.chat_template"

func writeU64(w io.Writer, v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	w.Write(b[:])
}

func writeStr(w io.Writer, s string) {
	writeU64(w, uint64(len(s)))
	io.WriteString(w, s)
}

// WeightsDigest returns the digest of f's weights, the model field of the
// pack identity. It is BLAKE3 over this encoding, where u32 and u64 are
// little-endian and str is a u64 byte length followed by the bytes:
//
//	str("muser/gguf/weights/v1")
//	u64(number of tensors)
//	for each tensor, in increasing byte order of name:
//	    str(name) u32(ggml type id)
//	    u64(ne0) u64(ne1) u64(ne2) u64(ne3)   (missing dimensions are 1)
//	    u64(data size) data
//
// It depends only on the tensors, not on metadata, tensor order, alignment
// or offsets. It reads every byte of tensor data, so it costs one pass over
// the file. f must be open.
func WeightsDigest(f *File) [32]byte {
	if f.closed {
		panic("gguf: WeightsDigest of a closed File")
	}
	order := make([]*TensorInfo, len(f.Tensors))
	for i := range f.Tensors {
		order[i] = &f.Tensors[i]
	}
	sort.Slice(order, func(a, b int) bool { return order[a].Name < order[b].Name })
	h := b3.New() // the bulk of a model load's hashing: 16 chunks at a time with AVX-512
	writeStr(h, weightsDomain)
	writeU64(h, uint64(len(order)))
	var b [4]byte
	for _, t := range order {
		writeStr(h, t.Name)
		binary.LittleEndian.PutUint32(b[:], uint32(t.Type))
		h.Write(b[:])
		for d := 0; d < MaxDims; d++ {
			n := int64(1)
			if d < len(t.Shape) {
				n = t.Shape[d]
			}
			writeU64(h, uint64(n))
		}
		writeU64(h, uint64(t.Size))
		h.Write(f.Data(t))
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// TemplateDigest returns the digest of a chat template's text, the template
// field of the pack identity: BLAKE3 over str("muser/gguf/chat-template/v1")
// str(text), with str as in WeightsDigest. The empty text stands for "no
// template".
func TemplateDigest(text string) [32]byte {
	h := blake3.New()
	writeStr(h, templateDomain)
	writeStr(h, text)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// ChatTemplateDigest returns TemplateDigest of f's tokenizer.chat_template,
// or of "" when f has none. It fails if the key holds something other than
// a string.
func ChatTemplateDigest(f *File) ([32]byte, error) {
	text, err := f.Meta.StringOr(KeyChatTemplate, "")
	if err != nil {
		return [32]byte{}, err
	}
	return TemplateDigest(text), nil
}

// isMatrix reports whether t counts as a weight matrix for QuantName: it
// has at least two dimensions greater than 1.
func isMatrix(t *TensorInfo) bool {
	big := 0
	for _, d := range t.Shape {
		if d > 1 {
			big++
		}
	}
	return big >= 2
}

// QuantName names the weight quantization of f, the quant field of the
// pack identity. The weight matrices are the tensors with at least two
// dimensions greater than 1 (so norms, biases and other vectors do not
// count, but embeddings and output projections do).
//
//   - If every weight matrix has the same type, the name is that type's
//     name ("Q8_0", "F32").
//   - If they differ, it is "mixed:" followed by the distinct type names in
//     increasing order joined by "+", "@", and the first 16 hex digits of
//     BLAKE3 over str("muser/gguf/quant-mix/v1") and, for each matrix in
//     increasing name order, str(name) u32(type id) ("mixed:Q4_K+Q6_K@
//     0123456789abcdef"), so that two files mixing the same types
//     differently get different names.
//   - If f has no weight matrix, it is "none".
func QuantName(f *File) string {
	var mats []*TensorInfo
	seen := map[ggml.Type]bool{}
	for i := range f.Tensors {
		if t := &f.Tensors[i]; isMatrix(t) {
			mats = append(mats, t)
			seen[t.Type] = true
		}
	}
	switch len(seen) {
	case 0:
		return "none"
	case 1:
		return mats[0].Type.String()
	}
	names := make([]string, 0, len(seen))
	for t := range seen {
		names = append(names, t.String())
	}
	sort.Strings(names)
	sort.Slice(mats, func(a, b int) bool { return mats[a].Name < mats[b].Name })
	h := blake3.New()
	writeStr(h, quantDomain)
	var b [4]byte
	for _, t := range mats {
		writeStr(h, t.Name)
		binary.LittleEndian.PutUint32(b[:], uint32(t.Type))
		h.Write(b[:])
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return "mixed:" + strings.Join(names, "+") + "@" + hex.EncodeToString(sum[:8])
}
