package pack_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/muserhq/muser/pack"
)

// Fuzz targets: every decoder of the format. Each must return either a
// value that re-encodes to exactly its input (the encodings are canonical)
// or an error wrapping ErrCorrupt, and never panic. Seeds live in
// testdata/fuzz/<Target>/.

func FuzzDecodeIdentity(f *testing.F) {
	b, _ := goldenIdentity().MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, in []byte) {
		id, err := pack.DecodeIdentity(in)
		if err != nil {
			if !errors.Is(err, pack.ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		out, err := id.MarshalBinary()
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("not canonical: %v", err)
		}
	})
}

func FuzzDecodeManifest(f *testing.F) {
	_, b, _ := sampleManifest(f, 2)
	f.Add(b)
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := pack.DecodeManifest(in)
		if err != nil {
			if !errors.Is(err, pack.ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		out, err := m.Marshal()
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("not canonical: %v", err)
		}
		_ = m.CheckRoot()
		_ = m.BlockKeys()
	})
}

func FuzzDecodeSeal(f *testing.F) {
	s, _ := pack.NewSeal(testKey, pack.Digest{1}, "node-a", 5, [pack.NonceSize]byte{7})
	b, _ := s.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := pack.DecodeSeal(in)
		if err != nil {
			if !errors.Is(err, pack.ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		out, err := s.MarshalBinary()
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("not canonical: %v", err)
		}
		_ = s.Verify(testKey, pack.Digest{1})
	})
}

func FuzzReadFile(f *testing.F) {
	_, mb, cs := sampleManifest(f, 2)
	f.Add(exportBytes(f, mb, chunkMap(cs)))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, seal, chunks, err := pack.ReadFile(in)
		if err != nil {
			if !errors.Is(err, pack.ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		// Whatever was accepted re-exports to the same bytes.
		var buf bytes.Buffer
		fw, err := pack.NewFileWriter(&buf, m, seal)
		if err != nil {
			t.Fatal(err)
		}
		for {
			ref, ok := fw.Next()
			if !ok {
				break
			}
			if err := fw.WriteChunk(chunks[ref.ID]); err != nil {
				t.Fatal(err)
			}
		}
		if err := fw.Close(); err != nil || !bytes.Equal(buf.Bytes(), in) {
			t.Fatalf("accepted file does not re-export identically: %v", err)
		}
	})
}

func FuzzParseDigest(f *testing.F) {
	f.Add(pack.Digest{1, 2, 3}.String())
	f.Fuzz(func(t *testing.T, s string) {
		d, err := pack.ParseDigest(s)
		if err != nil {
			if !errors.Is(err, pack.ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if d.String() != strings.ToLower(s) {
			t.Fatalf("ParseDigest(%q) = %s", s, d)
		}
	})
}
