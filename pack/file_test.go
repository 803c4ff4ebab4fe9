package pack_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/muserhq/muser/pack"
)

var testKey = []byte("0123456789abcdef-cluster-secret")

func exportBytes(t testing.TB, mb []byte, chunks map[pack.Digest][]byte) []byte {
	t.Helper()
	seal, err := pack.NewSeal(testKey, pack.PackID(mb), "node-a", 1, [pack.NonceSize]byte{9})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	fw, err := pack.NewFileWriter(&buf, mb, seal)
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
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func chunkMap(cs [][]byte) map[pack.Digest][]byte {
	out := map[pack.Digest][]byte{}
	for _, c := range cs {
		out[pack.ChunkID(c)] = c
	}
	return out
}

func TestFileRoundTrip(t *testing.T) {
	m, _, cs := sampleManifest(t, 3)
	// Repeat a chunk: the file stores it once.
	m.Chunks[2] = m.Chunks[0]
	m.Root = pack.MerkleRoot(m.ChunkIDs())
	mb, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	file := exportBytes(t, mb, chunkMap(cs))
	gotM, seal, chunks, err := pack.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotM, mb) || len(chunks) != 2 {
		t.Fatalf("got manifest equal=%v and %d chunks, want equal and 2", bytes.Equal(gotM, mb), len(chunks))
	}
	if err := seal.Verify(testKey, pack.PackID(gotM)); err != nil {
		t.Fatal(err)
	}
}

// TestFileEveryCutAndFlip: any truncation or single-byte flip of an export
// file is refused by the reader (decode, digest or trailer), never
// accepted and never a panic.
func TestFileEveryCutAndFlip(t *testing.T) {
	_, mb, cs := sampleManifest(t, 2)
	file := exportBytes(t, mb, chunkMap(cs))
	for n := 0; n < len(file); n++ {
		if _, _, _, err := pack.ReadFile(file[:n]); !errors.Is(err, pack.ErrCorrupt) {
			t.Fatalf("cut at %d: got %v, want ErrCorrupt", n, err)
		} else if r := pack.ReasonOf(err); n > 20 && r != pack.ReasonTruncated && r != pack.ReasonManifestDigest {
			// Cuts inside the manifest can also surface as malformed.
			if r != pack.ReasonMalformed {
				t.Fatalf("cut at %d: reason %s (%v)", n, r, err)
			}
		}
	}
	for i := range file {
		c := bytes.Clone(file)
		c[i] ^= 0x10
		if _, _, _, err := pack.ReadFile(c); err == nil {
			t.Fatalf("flip at %d accepted", i)
		}
	}
	if _, _, _, err := pack.ReadFile(append(bytes.Clone(file), 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
}

// TestFileReadErrors: a read that fails (an I/O error, not the end of
// the input) anywhere in an export file, the trailer included, is
// returned as that error: never a truncation or another format error
// naming the file's bytes, and never an accepted file.
func TestFileReadErrors(t *testing.T) {
	_, mb, cs := sampleManifest(t, 2)
	file := exportBytes(t, mb, chunkMap(cs))
	ioErr := errors.New("input/output error")
	for n := 0; n <= len(file); n++ {
		r := io.MultiReader(bytes.NewReader(file[:n]), iotest.ErrReader(ioErr))
		err := readAll(r)
		if !errors.Is(err, ioErr) || errors.Is(err, pack.ErrCorrupt) {
			t.Fatalf("input failing after %d of %d bytes: got %v, want the read's error and not ErrCorrupt", n, len(file), err)
		}
	}
}

// readAll reads an export file from r to its end, as ReadFile does.
func readAll(r io.Reader) error {
	fr, err := pack.NewFileReader(r)
	if err != nil {
		return err
	}
	for {
		if _, _, err := fr.Next(); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
	}
	return fr.Finish()
}

func TestFileWriterRefusesWrongChunk(t *testing.T) {
	_, mb, cs := sampleManifest(t, 2)
	seal, _ := pack.NewSeal(testKey, pack.PackID(mb), "n", 1, [pack.NonceSize]byte{})
	fw, err := pack.NewFileWriter(io.Discard, mb, seal)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(cs[0])
	bad[0] ^= 1
	err = fw.WriteChunk(bad)
	var de *pack.DigestError
	if !errors.As(err, &de) {
		t.Fatalf("got %v, want DigestError", err)
	}
	if err2 := fw.WriteChunk(cs[0]); err2 != err {
		t.Fatalf("writer not poisoned: got %v after %v", err2, err)
	}
	if err := fw.Close(); err == nil {
		t.Fatal("Close after failure succeeded")
	}
}

// TestFileHeaderRefusals: hand-built export file heads, each refused with
// the reason docs/kvpack.md ("Export file", "Receipts") gives its fault.
// A manifest length of 0 is outside 1..MaxManifestBytes without exceeding
// anything: malformed, not oversize.
func TestFileHeaderRefusals(t *testing.T) {
	_, mb, _ := sampleManifest(t, 1)
	head := func(version, ml uint32, rest ...byte) []byte {
		b := []byte(pack.FileMagic)
		b = binary.LittleEndian.AppendUint32(b, version)
		b = binary.LittleEndian.AppendUint32(b, ml)
		return append(b, rest...)
	}
	withSeal := func(sl uint32) []byte {
		b := head(pack.FormatVersion, uint32(len(mb)), mb...)
		return append(binary.LittleEndian.AppendUint32(b, sl), make([]byte, 400)...)
	}
	tests := []struct {
		desc   string
		in     []byte
		reason pack.Reason
		field  string // for a *FormatError; "" for a *LimitError
	}{
		{"manifest length 0", head(pack.FormatVersion, 0, make([]byte, 64)...), pack.ReasonMalformed, "manifest length"},
		{"manifest length over the limit", head(pack.FormatVersion, pack.MaxManifestBytes+1), pack.ReasonOversize, ""},
		{"version 2", head(2, uint32(len(mb)), mb...), pack.ReasonMalformed, "version"},
		{"seal length over the limit", withSeal(pack.MaxSealBytes + 1), pack.ReasonOversize, ""},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := pack.NewFileReader(bytes.NewReader(tt.in))
			if got := pack.ReasonOf(err); got != tt.reason {
				t.Fatalf("NewFileReader: %v: reason %s, want %s", err, got, tt.reason)
			}
			var fe *pack.FormatError
			var le *pack.LimitError
			switch {
			case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field):
				t.Fatalf("NewFileReader: %v, want a *FormatError on field %q", err, tt.field)
			case tt.field == "" && !errors.As(err, &le):
				t.Fatalf("NewFileReader: %v, want a *LimitError", err)
			}
		})
	}
}
