package tokenizer

import (
	"encoding/binary"
	"math"

	"github.com/zeebo/blake3"
)

// digestDomain separates tokenizer digests from every other BLAKE3 use.
const digestDomain = "muser/tokenizer/v1"

// Digest returns the BLAKE3 digest of everything that decides which ids
// Encode produces and what Decode renders; doc.go ("Digest") gives the
// encoding. Two tokenizers with equal digests tokenize every text alike.
// It is the tokenizer field of a pack identity.
func (t *Tokenizer) Digest() [32]byte {
	t.digestOnce.Do(func() { t.digest = t.computeDigest() })
	return t.digest
}

func (t *Tokenizer) computeDigest() [32]byte {
	h := blake3.New()
	var buf [8]byte
	u32 := func(v uint32) {
		binary.LittleEndian.PutUint32(buf[:4], v)
		h.Write(buf[:4])
	}
	u64 := func(v uint64) {
		binary.LittleEndian.PutUint64(buf[:], v)
		h.Write(buf[:])
	}
	str := func(s string) {
		u64(uint64(len(s)))
		h.WriteString(s)
	}
	flag := func(b bool) {
		if b {
			h.Write([]byte{1})
		} else {
			h.Write([]byte{0})
		}
	}
	str(digestDomain)
	str(t.model)
	pre := ""
	if t.kind == kindBPE {
		pre = t.preName
	}
	str(pre)
	for _, f := range []bool{t.addBOS, t.addEOS, t.addSpacePrefix, t.cleanSpaces, t.escapeSpaces, t.ignoreMerges} {
		flag(f)
	}
	u64(uint64(len(t.tokens)))
	for i, tok := range t.tokens {
		str(tok)
		u32(math.Float32bits(t.scores[i]))
		u32(uint32(t.types[i]))
		u32(uint32(t.attrs[i]))
	}
	u64(uint64(numSpecial))
	for _, id := range t.special {
		u32(uint32(id))
	}
	eog := t.EOGs()
	u64(uint64(len(eog)))
	for _, id := range eog {
		u32(uint32(id))
	}
	u64(uint64(len(t.merges)))
	for _, m := range t.merges {
		str(m)
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}
