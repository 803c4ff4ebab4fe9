package tier_test

import (
	"bytes"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store/tier"
)

// FuzzParseURL: ParseURL never panics, and what it accepts prints back
// to a URL that parses to the same location.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://bucket", "s3://my-bucket/fleet/a", "s3://b/", "http://x", "s3://A/b", "s3://bucket/a//b", "s3://bucket/../x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		loc, err := tier.ParseURL(s)
		if err != nil {
			return
		}
		again, err := tier.ParseURL(loc.String())
		if err != nil || again != loc {
			t.Fatalf("ParseURL(%q) = %+v, which prints as %q and parses to %+v, %v", s, loc, loc.String(), again, err)
		}
	})
}

// FuzzDecodeObject: DecodeObject never panics, and what it accepts
// re-encodes to the same bytes.
func FuzzDecodeObject(f *testing.F) {
	seal, err := pack.NewSeal(bytes.Repeat([]byte("k"), 32), pack.Digest{1}, "node-a", 7, [pack.NonceSize]byte{2})
	if err != nil {
		f.Fatal(err)
	}
	obj, err := tier.EncodeObject(seal, []byte("KVPM manifest bytes"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(obj)
	f.Add(obj[:20])
	f.Add([]byte(tier.ObjectMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, mb, err := tier.DecodeObject(b)
		if err != nil {
			return
		}
		again, err := tier.EncodeObject(s, mb)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("DecodeObject accepted %x but re-encodes to %x (%v)", b, again, err)
		}
	})
}
