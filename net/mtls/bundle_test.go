package mtls

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/muserhq/muser/pack"
)

func newTestBundle(t testing.TB) *Bundle {
	t.Helper()
	ca, id := newTestCA(t)
	b := &Bundle{ClusterID: id, Node: issue(t, ca, "beta"), Issuer: "alpha", CA: ca.Cert}
	if _, err := rand.Read(b.LinkSecret[:]); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBundleRoundTrip(t *testing.T) {
	b := newTestBundle(t)
	data, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseBundle(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Check(testNow); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if got.ClusterID != b.ClusterID || got.Node.Name != b.Node.Name || got.Issuer != b.Issuer ||
		!got.CA.Equal(b.CA) || !got.Node.Cert.Equal(b.Node.Cert) || got.LinkSecret != b.LinkSecret {
		t.Fatalf("round trip changed the bundle: got %+v, want %+v", got, b)
	}
	again, err := got.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Fatal("re-encoding a decoded bundle changed its bytes")
	}
}

// rechecksum recomputes the trailer of a bundle whose body a test changed.
func rechecksum(b []byte) []byte {
	body := b[:len(b)-sha256.Size]
	sum := sha256.Sum256(body)
	return append(append([]byte{}, body...), sum[:]...)
}

func TestParseBundleFaults(t *testing.T) {
	good, err := newTestBundle(t).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte{}, good...)) }
	// Offsets of the first field (cluster ID) and its length.
	tests := []struct {
		desc  string
		in    []byte
		field string
	}{
		{"empty", nil, "size"},
		{"short", good[:40], "size"},
		{"too big", make([]byte, MaxBundleSize+1), "size"},
		{"magic", mod(func(b []byte) []byte { b[0] = 'X'; return rechecksum(b) }), "magic"},
		{"version", mod(func(b []byte) []byte { b[8] = 2; return rechecksum(b) }), "version"},
		{"reserved", mod(func(b []byte) []byte { b[10] = 1; return rechecksum(b) }), "reserved"},
		{"cluster ID length", mod(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], 15); return rechecksum(b) }), "cluster ID"},
		{"node name too long", mod(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[12+4+16:], 64)
			return rechecksum(b)
		}), "node name"},
		{"node name length past end", mod(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[12+4+16:], 63)
			return rechecksum(b[:12+4+16+4+10+sha256.Size])
		}), "node name"},
		{"bad node name", mod(func(b []byte) []byte { b[12+4+16+4] = 'B'; return rechecksum(b) }), "node name"},
		{"checksum", mod(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "checksum"},
		{"flipped body byte", mod(func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }), "checksum"},
		{"truncated", good[:len(good)-1], "checksum"},
		{"trailing", rechecksum(append(append([]byte{}, good[:len(good)-sha256.Size]...), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), "trailer"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := ParseBundle(tt.in)
			var be *BundleError
			if !errors.As(err, &be) {
				t.Fatalf("ParseBundle = %v, want a *BundleError", err)
			}
			if be.Field != tt.field {
				t.Fatalf("field = %q (%v), want %q", be.Field, err, tt.field)
			}
			if !errors.Is(err, ErrBadBundle) || !errors.Is(err, pack.ErrCorrupt) {
				t.Fatalf("%v does not wrap ErrBadBundle and pack.ErrCorrupt", err)
			}
		})
	}
}

func TestBundleCheckFaults(t *testing.T) {
	otherCA, _ := newTestCA(t)
	tests := []struct {
		desc string
		mod  func(b *Bundle)
		want string
	}{
		{"other CA", func(b *Bundle) { b.CA = otherCA.Cert }, "cluster"},
		{"zero secret", func(b *Bundle) { b.LinkSecret = [LinkSecretLen]byte{} }, "all zero"},
		{"node cert as CA", func(b *Bundle) { b.CA = b.Node.Cert }, "not a CA"},
		{"name mismatch", func(b *Bundle) { b.Node.Name = "gamma" }, `want "gamma"`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			b := newTestBundle(t)
			tt.mod(b)
			err := b.Check(testNow)
			if err == nil || !errors.Is(err, ErrBadCredential) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check = %v, want ErrBadCredential containing %q", err, tt.want)
			}
		})
	}
}

// FuzzParseBundle checks that the decoder never panics, and that anything it
// accepts re-encodes to bytes it decodes to the same bundle.
func FuzzParseBundle(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/fuzz/FuzzParseBundle/*")
	if len(seeds) == 0 {
		if b, err := newTestBundle(f).MarshalBinary(); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(bundleMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBundle(data)
		if err != nil {
			if !errors.Is(err, ErrBadBundle) {
				t.Fatalf("error %v does not wrap ErrBadBundle", err)
			}
			return
		}
		out, err := b.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded bundle does not re-encode: %v", err)
		}
		b2, err := ParseBundle(out)
		if err != nil {
			t.Fatalf("re-encoded bundle does not decode: %v", err)
		}
		out2, err := b2.MarshalBinary()
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("encoding is not stable: %v", err)
		}
	})
}

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the committed fuzz seed corpora")

// TestWriteFuzzSeeds writes the seed corpus when run with -update-seeds; the
// seeds are committed so CI's short fuzz runs start from valid bundles.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*updateSeeds {
		t.Skip("run with -update-seeds to rewrite testdata/fuzz/FuzzParseBundle")
	}
	b, err := newTestBundle(t).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParseBundle")
	// write writes one seed into dir (which the code below may change).
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		var buf bytes.Buffer
		buf.WriteString("go test fuzz v1\n[]byte(")
		buf.WriteString(strconv.Quote(string(data)))
		buf.WriteString(")\n")
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("valid", b)
	write("truncated", b[:len(b)/2])

	// FuzzParsePEM seeds: a certificate and a key.
	ca, _ := newTestCA(t)
	cred := issue(t, ca, "alpha")
	keyPEM, err := EncodeKeyPEM(cred.Key)
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join("testdata", "fuzz", "FuzzParsePEM")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write("cert", EncodeCertPEM(cred.Cert))
	write("key", keyPEM)
}
