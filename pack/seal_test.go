package pack_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
)

func TestSeal(t *testing.T) {
	key := []byte("0123456789abcdef-cluster-secret")
	id := packtest.Digest("pack")
	nonce := [pack.NonceSize]byte{1, 2, 3}
	s, err := pack.NewSeal(key, id, "node-a", 42, nonce)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(key, id); err != nil {
		t.Fatalf("verify: %v", err)
	}
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	s2, err := pack.DecodeSeal(b)
	if err != nil || s2 != s {
		t.Fatalf("round trip: got %+v, %v", s2, err)
	}
	bad := []struct {
		name string
		seal pack.Seal
		key  []byte
		id   pack.Digest
	}{
		{"other key", s, []byte("0123456789abcdef-other"), id},
		{"other pack", s, key, packtest.Digest("other")},
		{"producer", func() pack.Seal { c := s; c.Producer = "node-b"; return c }(), key, id},
		{"generation", func() pack.Seal { c := s; c.Generation++; return c }(), key, id},
		{"nonce", func() pack.Seal { c := s; c.Nonce[15] ^= 1; return c }(), key, id},
		{"mac", func() pack.Seal { c := s; c.MAC[0] ^= 1; return c }(), key, id},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.seal.Verify(tt.key, tt.id)
			var se *pack.SealError
			if !errors.As(err, &se) || !errors.Is(err, pack.ErrRefused) || pack.ReasonOf(err) != pack.ReasonBadSeal {
				t.Fatalf("got %v, want *SealError (bad-seal)", err)
			}
		})
	}
	if _, err := pack.NewSeal([]byte("short"), id, "n", 1, nonce); !errors.Is(err, pack.ErrInvalid) {
		t.Fatalf("short key: got %v, want ErrInvalid", err)
	}
	for n := 0; n < len(b); n++ {
		if _, err := pack.DecodeSeal(b[:n]); !errors.Is(err, pack.ErrCorrupt) {
			t.Fatalf("prefix %d: got %v", n, err)
		}
	}
	if _, err := pack.DecodeSeal(append(bytes.Clone(b), 9)); !errors.Is(err, pack.ErrCorrupt) {
		t.Fatal("trailing byte accepted")
	}
}
