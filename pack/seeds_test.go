package pack_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/pack"
)

// TestFuzzSeeds keeps the committed fuzz seed corpora (testdata/fuzz/) in
// step with the format: with -update it rewrites them from the encoders,
// otherwise it checks that each valid seed still decodes.
func TestFuzzSeeds(t *testing.T) {
	idb, _ := goldenIdentity().MarshalBinary()
	_, mb, cs := sampleManifest(t, 2)
	s, _ := pack.NewSeal(testKey, pack.Digest{1}, "node-a", 5, [pack.NonceSize]byte{7})
	sb, _ := s.MarshalBinary()
	file := exportBytes(t, mb, chunkMap(cs))
	seeds := map[string]map[string][]byte{
		"FuzzDecodeIdentity": {"valid": idb, "truncated": idb[:40]},
		"FuzzDecodeManifest": {"valid": mb, "truncated": mb[:len(mb)/2], "huge-count": func() []byte {
			c := append([]byte(nil), mb...)
			copy(c[12+len(idb)+36:], []byte{0xff, 0xff, 0xff, 0x7f})
			return c
		}()},
		"FuzzDecodeSeal": {"valid": sb, "truncated": sb[:10]},
		"FuzzReadFile":   {"valid": file, "truncated": file[:len(file)-40]},
	}
	decode := map[string]func([]byte) error{
		"FuzzDecodeIdentity": func(b []byte) error { _, err := pack.DecodeIdentity(b); return err },
		"FuzzDecodeManifest": func(b []byte) error { _, err := pack.DecodeManifest(b); return err },
		"FuzzDecodeSeal":     func(b []byte) error { _, err := pack.DecodeSeal(b); return err },
		"FuzzReadFile":       func(b []byte) error { _, _, _, err := pack.ReadFile(b); return err },
	}
	for target, files := range seeds {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, b := range files {
			path := filepath.Join(dir, name)
			if *update {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
				if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("seed %s missing (run go test -run TestFuzzSeeds -update): %v", path, err)
			}
			if err := decode[target](b); (err == nil) != (name == "valid") {
				t.Errorf("%s/%s: got err %v", target, name, err)
			}
		}
	}
}
