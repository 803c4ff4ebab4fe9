package pack

import (
	"crypto/subtle"
	"encoding/binary"
	"fmt"

	"github.com/zeebo/blake3"
)

// Seal layout constants (docs/kvpack.md, "Seal").
const (
	// MinSealKey is the shortest secret accepted as a seal key, in bytes.
	MinSealKey = 16
	// NonceSize is the length of a seal's nonce.
	NonceSize = 16
	// MaxSealBytes bounds an encoded seal.
	MaxSealBytes = 2 + MaxProducer + 8 + NonceSize + 32
)

// Seal authenticates a manifest when it travels (export files,
// replication). It binds the pack ID to the sending producer, that
// producer's seal generation (a counter it increments for every seal it
// makes) and a random nonce, under a key the sender and receiver share.
// The receiver refuses a nonce it has seen from that producer (replay) and
// a generation not greater than the last it accepted (stale generation).
type Seal struct {
	Producer   string          `json:"producer"`
	Generation uint64          `json:"generation"`
	Nonce      [NonceSize]byte `json:"nonce"`
	MAC        Digest          `json:"mac"`
}

// sealKey derives the 32-byte BLAKE3 key from a shared secret.
func sealKey(secret []byte) ([]byte, error) {
	if len(secret) < MinSealKey {
		return nil, fmt.Errorf("%w: seal key is %d bytes, need at least %d", ErrInvalid, len(secret), MinSealKey)
	}
	k := make([]byte, 32)
	blake3.DeriveKey(ctxSealKey, secret, k)
	return k, nil
}

// mac computes the seal's MAC: keyed BLAKE3 under DK(seal key)(secret) of
// packID ‖ u16 len(producer) ‖ producer ‖ u64 generation ‖ nonce.
func (s *Seal) mac(secret []byte, packID Digest) (Digest, error) {
	k, err := sealKey(secret)
	if err != nil {
		return Digest{}, err
	}
	h, err := blake3.NewKeyed(k)
	if err != nil {
		return Digest{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	b := make([]byte, 0, 32+2+len(s.Producer)+8+NonceSize)
	b = append(b, packID[:]...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s.Producer)))
	b = append(b, s.Producer...)
	b = binary.LittleEndian.AppendUint64(b, s.Generation)
	b = append(b, s.Nonce[:]...)
	_, _ = h.Write(b)
	var d Digest
	h.Sum(d[:0])
	return d, nil
}

// NewSeal seals packID for travel from producer under secret (at least
// MinSealKey bytes). The caller supplies a fresh random nonce and the next
// value of its seal generation counter.
func NewSeal(secret []byte, packID Digest, producer string, generation uint64, nonce [NonceSize]byte) (Seal, error) {
	if err := checkText(producer, MaxProducer); err != nil {
		return Seal{}, fmt.Errorf("%w: producer %s", ErrInvalid, err)
	}
	s := Seal{Producer: producer, Generation: generation, Nonce: nonce}
	mac, err := s.mac(secret, packID)
	if err != nil {
		return Seal{}, err
	}
	s.MAC = mac
	return s, nil
}

// Verify returns nil if s seals packID under secret, else a *SealError
// (wrapping ErrRefused). The comparison takes constant time.
func (s Seal) Verify(secret []byte, packID Digest) error {
	want, err := s.mac(secret, packID)
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare(want[:], s.MAC[:]) != 1 {
		return &SealError{Producer: s.Producer, Problem: fmt.Sprintf("MAC does not verify for pack %s (wrong key, or the manifest or seal was altered)", packID)}
	}
	return nil
}

// MarshalBinary returns the seal's encoding: u16 producer length,
// producer, u64 generation, nonce, MAC.
func (s Seal) MarshalBinary() ([]byte, error) {
	if err := checkText(s.Producer, MaxProducer); err != nil {
		return nil, fmt.Errorf("%w: seal producer %s", ErrInvalid, err)
	}
	b := make([]byte, 0, 2+len(s.Producer)+8+NonceSize+32)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s.Producer)))
	b = append(b, s.Producer...)
	b = binary.LittleEndian.AppendUint64(b, s.Generation)
	b = append(b, s.Nonce[:]...)
	b = append(b, s.MAC[:]...)
	return b, nil
}

// DecodeSeal decodes a seal encoding; errors wrap ErrCorrupt.
func DecodeSeal(b []byte) (Seal, error) {
	d := decoder{obj: "seal", b: b}
	var s Seal
	s.Producer = d.text("producer", 2, MaxProducer)
	s.Generation = d.u64("generation")
	if p := d.take("nonce", NonceSize); p != nil {
		copy(s.Nonce[:], p)
	}
	s.MAC = d.digest("mac")
	d.end()
	if d.err != nil {
		return Seal{}, d.err
	}
	return s, nil
}
