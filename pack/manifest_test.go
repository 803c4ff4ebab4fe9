package pack_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
)

func sampleManifest(t testing.TB, blocks int) (*pack.Manifest, []byte, [][]byte) {
	t.Helper()
	m, chunks := packtest.Manifest(packtest.Identity("m"), []byte("salt"), packtest.Tokens(3, 4*blocks, 50000), 4, 64)
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return m, b, chunks
}

func TestManifestRoundTrip(t *testing.T) {
	for _, blocks := range []int{1, 2, 3, 17} {
		m, b, _ := sampleManifest(t, blocks)
		got, err := pack.DecodeManifest(b)
		if err != nil {
			t.Fatalf("%d blocks: %v", blocks, err)
		}
		if err := got.CheckRoot(); err != nil {
			t.Fatal(err)
		}
		b2, err := got.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, b2) {
			t.Fatalf("%d blocks: re-encoding differs", blocks)
		}
		if !got.Created.Equal(m.Created) || got.Producer != m.Producer || got.Generation != m.Generation {
			t.Fatalf("got %v/%q/%d, want %v/%q/%d", got.Created, got.Producer, got.Generation, m.Created, m.Producer, m.Generation)
		}
		if got.Bytes() != uint64(64*blocks) {
			t.Fatalf("Bytes: got %d, want %d", got.Bytes(), 64*blocks)
		}
	}
}

// TestManifestEveryPrefixAndFlip: a manifest cut anywhere is a truncation,
// and a manifest with any single byte flipped either fails to decode, fails
// its root check, or has another pack ID.
func TestManifestEveryPrefixAndFlip(t *testing.T) {
	_, b, _ := sampleManifest(t, 3)
	id := pack.PackID(b)
	for n := 0; n < len(b); n++ {
		_, err := pack.DecodeManifest(b[:n])
		if !errors.Is(err, pack.ErrCorrupt) {
			t.Fatalf("prefix %d: got %v, want ErrCorrupt", n, err)
		}
		if r := pack.ReasonOf(err); r != pack.ReasonTruncated && r != pack.ReasonMalformed {
			t.Fatalf("prefix %d: reason %s", n, r)
		}
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x01
		m, err := pack.DecodeManifest(c)
		if err == nil {
			err = m.CheckRoot()
		}
		if err == nil && pack.PackID(c) == id {
			t.Fatalf("flip at %d: undetected", i)
		}
	}
}

func TestDecodeManifestErrors(t *testing.T) {
	_, good, _ := sampleManifest(t, 2)
	idLen := int(good[8]) | int(good[9])<<8
	countOff := 12 + idLen + 32 + 4
	set := func(off int, p []byte) []byte { c := bytes.Clone(good); copy(c[off:], p); return c }
	tests := []struct {
		name   string
		in     []byte
		reason pack.Reason
		text   string
	}{
		{"empty", nil, pack.ReasonTruncated, "magic"},
		{"bad magic", set(0, []byte("XXXX")), pack.ReasonMalformed, "magic"},
		{"future version", set(4, packtest.U32(2)), pack.ReasonMalformed, "version"},
		{"huge identity", set(8, packtest.U32(1<<30)), pack.ReasonOversize, "identity length"},
		{"zero block tokens", set(12+idLen+32, packtest.U32(0)), pack.ReasonMalformed, "block tokens"},
		{"huge block count", set(countOff, packtest.U32(1<<31)), pack.ReasonOversize, "token count"},
		{"block count beyond input", set(countOff, packtest.U32(1000)), pack.ReasonTruncated, "tokens"},
		{"negative token", set(countOff+4, packtest.U32(1<<31)), pack.ReasonMalformed, "token 0"},
		{"trailing byte", append(bytes.Clone(good), 0), pack.ReasonMalformed, "trailing"},
		{"zero created", set(len(good)-8, make([]byte, 8)), pack.ReasonMalformed, "created"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pack.DecodeManifest(tt.in)
			if !errors.Is(err, pack.ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
			if r := pack.ReasonOf(err); r != tt.reason {
				t.Errorf("reason: got %s, want %s (%v)", r, tt.reason, err)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("message %q does not mention %q", err, tt.text)
			}
		})
	}
}

func TestManifestRootMismatch(t *testing.T) {
	m, _, _ := sampleManifest(t, 5)
	m.Chunks[3].ID[0] ^= 1
	err := m.CheckRoot()
	var de *pack.DigestError
	if !errors.As(err, &de) || de.Kind != pack.DigestMerkleRoot || de.Expected != m.Root {
		t.Fatalf("got %v, want merkle-root DigestError", err)
	}
	if pack.ReasonOf(err) != pack.ReasonMerkleRoot {
		t.Fatalf("reason: got %s", pack.ReasonOf(err))
	}
}

func TestManifestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*pack.Manifest)
	}{
		{"chunk count", func(m *pack.Manifest) { m.Chunks = m.Chunks[:1] }},
		{"zero chunk size", func(m *pack.Manifest) { m.Chunks[0].Size = 0 }},
		{"empty producer", func(m *pack.Manifest) { m.Producer = "" }},
		{"zero time", func(m *pack.Manifest) { m.Created = time.Time{} }},
		{"time before 1970", func(m *pack.Manifest) { m.Created = time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC) }},
		// Past 2262 the nanoseconds since 1970 overflow: the encoding
		// would name another instant.
		{"time past 2262", func(m *pack.Manifest) { m.Created = time.Date(2600, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"negative token", func(m *pack.Manifest) { m.Tokens[2] = -1 }},
		{"bad identity", func(m *pack.Manifest) { m.Identity.Engine = "" }},
		{"chunk ID of two sizes", func(m *pack.Manifest) {
			m.Chunks[1] = pack.ChunkRef{ID: m.Chunks[0].ID, Size: m.Chunks[0].Size + 1}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, _ := sampleManifest(t, 2)
			tt.mutate(m)
			if _, err := m.Marshal(); !errors.Is(err, pack.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
}

// TestManifestChunkOfTwoSizes: a chunk ID names one byte string, so a
// manifest that repeats a chunk ID with another size describes no pack.
// Its root (over the IDs only) checks, so the decoder must refuse it, or
// a receiver would publish a pack whose block can never be read. The
// bytes are a valid manifest that repeats chunk 0 as chunk 1, with chunk
// 1's size changed by hand.
func TestManifestChunkOfTwoSizes(t *testing.T) {
	m, _, _ := sampleManifest(t, 3)
	m.Chunks[1] = m.Chunks[0]
	m.Root = pack.MerkleRoot(m.ChunkIDs())
	good, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pack.DecodeManifest(good); err != nil {
		t.Fatalf("a repeated chunk of one size: %v", err)
	}
	idLen := int(good[8]) | int(good[9])<<8
	sizeOff := 12 + idLen + 32 + 8 + 4*len(m.Tokens) + 36 + 32 // chunk 1's size
	for _, size := range []uint32{m.Chunks[0].Size + 1, m.Chunks[0].Size - 1, pack.MaxChunkBytes} {
		bad := bytes.Clone(good)
		copy(bad[sizeOff:], packtest.U32(size))
		got, err := pack.DecodeManifest(bad)
		if err == nil {
			err = got.CheckRoot()
		}
		var fe *pack.FormatError
		if !errors.As(err, &fe) || fe.Field != "chunk 1 size" || fe.Offset != int64(sizeOff) {
			t.Fatalf("size %d: DecodeManifest = %v, want a *FormatError on field %q at offset %d", size, err, "chunk 1 size", sizeOff)
		}
		if r := pack.ReasonOf(err); r != pack.ReasonMalformed {
			t.Fatalf("size %d: reason %s, want %s", size, r, pack.ReasonMalformed)
		}
	}
}
