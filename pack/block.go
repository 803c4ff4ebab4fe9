package pack

import (
	"encoding/binary"
	"fmt"
)

// Limits on blocks and tokens (docs/kvpack.md, "Limits").
const (
	// MaxBlockTokens is the largest block size, in tokens.
	MaxBlockTokens = 1 << 16
	// MaxTokens is the most tokens one pack covers.
	MaxTokens = 1 << 22
	// MaxChunkBytes is the largest chunk, in bytes.
	MaxChunkBytes = 1 << 28
)

// CheckTokens returns an error wrapping ErrInvalid unless tokens is a
// non-empty whole number of blocks of blockTokens tokens, at most MaxTokens,
// with no negative token.
func CheckTokens(tokens []int32, blockTokens int) error {
	if blockTokens < 1 || blockTokens > MaxBlockTokens {
		return fmt.Errorf("%w: block size %d tokens is outside 1..%d", ErrInvalid, blockTokens, MaxBlockTokens)
	}
	switch {
	case len(tokens) == 0:
		return fmt.Errorf("%w: no tokens", ErrInvalid)
	case len(tokens)%blockTokens != 0:
		return fmt.Errorf("%w: %d tokens is not a whole number of %d-token blocks", ErrInvalid, len(tokens), blockTokens)
	case len(tokens) > MaxTokens:
		return fmt.Errorf("%w: %d tokens exceeds the limit %d", ErrInvalid, len(tokens), MaxTokens)
	}
	for i, t := range tokens {
		if t < 0 {
			return fmt.Errorf("%w: token %d at position %d is negative", ErrInvalid, t, i)
		}
	}
	return nil
}

// BlockKeys returns the block-key chain of tokens (docs/kvpack.md, "Block
// keys"): one key per whole block of blockTokens tokens; a trailing partial
// block has no key. key_0 = DK(first)(identityKey ‖ tenant ‖ u32 B ‖
// tokens[0:B]) and key_i = DK(next)(key_{i-1} ‖ u32 B ‖ tokens[iB:(i+1)B]),
// tokens as little-endian u32. A key therefore names the identity, the
// tenant and every token before the end of its block. A negative token
// ends the chain before the block that holds it.
func BlockKeys(identityKey, tenant Digest, tokens []int32, blockTokens int) []Digest {
	if blockTokens < 1 {
		return nil
	}
	n := len(tokens) / blockTokens
	keys := make([]Digest, 0, n)
	buf := make([]byte, 0, 4+4*blockTokens)
	var prev Digest
	for i := 0; i < n; i++ {
		buf = binary.LittleEndian.AppendUint32(buf[:0], uint32(blockTokens))
		for _, t := range tokens[i*blockTokens : (i+1)*blockTokens] {
			if t < 0 {
				return keys
			}
			buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
		}
		if i == 0 {
			prev = sum(hBlockFirst, identityKey[:], tenant[:], buf)
		} else {
			prev = sum(hBlockNext, prev[:], buf)
		}
		keys = append(keys, prev)
	}
	return keys
}
