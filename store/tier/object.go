package tier

import (
	"encoding/binary"
	"fmt"

	"github.com/muserhq/muser/pack"
)

// Layout of the bucket (docs/tier.md, "Objects"), under the prefix:
//
//	chunks/HEX     a chunk's bytes; HEX is its ID (BLAKE3, 64 hex digits)
//	manifests/HEX  a manifest object; HEX is the pack ID
//	pins/HEX       any object: fleet gc never evicts pack HEX
//	uses/HEX       any object: its last-modified time is the last time a
//	               node installed pack HEX (or found it already uploaded)
const (
	dirChunks    = "chunks/"
	dirManifests = "manifests/"
	dirPins      = "pins/"
	dirUses      = "uses/"
)

// ObjectMagic opens every manifest object.
const ObjectMagic = "MUTIERM1"

// MaxObjectBytes bounds a manifest object: the magic, the seal's length
// and encoding, and the largest manifest.
const MaxObjectBytes = len(ObjectMagic) + 2 + pack.MaxSealBytes + pack.MaxManifestBytes

// EncodeObject returns the manifest object of a sealed manifest:
// ObjectMagic, u16 (little-endian) seal length, the seal's encoding, then
// the manifest's canonical encoding to the end.
func EncodeObject(seal pack.Seal, manifest []byte) ([]byte, error) {
	sb, err := seal.MarshalBinary()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(ObjectMagic)+2+len(sb)+len(manifest))
	b = append(b, ObjectMagic...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(sb)))
	b = append(b, sb...)
	return append(b, manifest...), nil
}

// DecodeObject splits a manifest object into its seal and manifest
// bytes, checking the layout but neither the seal's MAC nor the
// manifest (the caller does, with the key and the store's rules). Errors
// are *pack.FormatError or *pack.LimitError and wrap pack.ErrCorrupt.
func DecodeObject(b []byte) (pack.Seal, []byte, error) {
	const obj = "tier manifest object"
	if len(b) > MaxObjectBytes {
		return pack.Seal{}, nil, &pack.LimitError{Object: obj, Field: "size", Got: uint64(len(b)), Max: uint64(MaxObjectBytes)}
	}
	if len(b) < len(ObjectMagic)+2 || string(b[:len(ObjectMagic)]) != ObjectMagic {
		return pack.Seal{}, nil, &pack.FormatError{Object: obj, Field: "magic", Problem: fmt.Sprintf("want %q", ObjectMagic)}
	}
	off := len(ObjectMagic)
	n := int(binary.LittleEndian.Uint16(b[off:]))
	off += 2
	if n > pack.MaxSealBytes || len(b)-off < n {
		return pack.Seal{}, nil, &pack.FormatError{Object: obj, Field: "seal length", Offset: int64(off - 2),
			Problem: fmt.Sprintf("%d bytes with %d left (at most %d)", n, len(b)-off, pack.MaxSealBytes)}
	}
	seal, err := pack.DecodeSeal(b[off : off+n])
	if err != nil {
		return pack.Seal{}, nil, err
	}
	off += n
	if len(b) == off {
		return pack.Seal{}, nil, &pack.FormatError{Object: obj, Field: "manifest", Offset: int64(off), Problem: "missing"}
	}
	return seal, b[off:], nil
}
