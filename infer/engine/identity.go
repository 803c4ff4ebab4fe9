package engine

import (
	"fmt"

	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/pack"
)

// NumericsVersion is the engine's numerics version, the N of the identity's
// engine field "muser-cpu/N". It must be bumped whenever a change to the
// forward pass or to the kernels (kernels.NumericsVersion, whose value a
// test pins) can change a single bit of K, V or logits, so packs computed
// by an older build are refused instead of mixed with new ones.
const NumericsVersion = 1

// EngineName is the identity's engine field for this build.
var EngineName = fmt.Sprintf("muser-cpu/%d", NumericsVersion)

// KVString returns the identity's kv field for this model's KV dtype and
// a block of blockTokens tokens: "f16;block=64;layout=lkv1".
func (m *Model) KVString(blockTokens int) string {
	return fmt.Sprintf("%s;block=%d;layout=lkv1", m.kv, blockTokens)
}

// WeightsDigest returns gguf.WeightsDigest of the model's file, computed on
// first use (it reads every byte of the weights) and remembered.
func (m *Model) WeightsDigest() [32]byte {
	m.digestOnce.Do(func() { m.digest = gguf.WeightsDigest(m.file) })
	return m.digest
}

// Identity returns the pack identity of KV computed by this model, given
// the digests of the tokenizer and chat template in use and the store's
// block size. Two engines share KV only if all eight fields are equal.
func (m *Model) Identity(tokenizer, template [32]byte, blockTokens int) pack.Identity {
	return pack.Identity{
		Format:    pack.FormatVersion,
		Model:     m.WeightsDigest(),
		Arch:      m.cfg.ArchString(),
		Tokenizer: tokenizer,
		Template:  template,
		Quant:     gguf.QuantName(m.file),
		KV:        m.KVString(blockTokens),
		Engine:    EngineName,
	}
}
