package pack_test

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/muserhq/muser/pack"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// goldenIdentity is the identity of docs/kvpack.md's test vectors.
func goldenIdentity() pack.Identity {
	var model, tok, tmpl pack.Digest
	for i := range model {
		model[i], tok[i], tmpl[i] = byte(i), byte(0x40+i), byte(0x80+i)
	}
	return pack.Identity{
		Format: pack.FormatVersion, Model: model, Tokenizer: tok, Template: tmpl,
		Arch:  "llama;layers=5;heads=8;kv_heads=4;head_dim=8;rope=normal;rope_base=10000;eps=1e-05",
		Quant: "F32", KV: "f16;block=4;layout=lkv1", Engine: "muser-cpu/1",
	}
}

// TestVectors pins every digest and encoding of the format to
// testdata/vectors.golden; docs/kvpack.md quotes it. A change here is a
// format change: bump FormatVersion.
func TestVectors(t *testing.T) {
	var out bytes.Buffer
	id := goldenIdentity()
	idb, err := id.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&out, "identity encoding: %x\n", idb)
	fmt.Fprintf(&out, "identity key: %s\n", id.Key())
	tenant := pack.TenantTag([]byte("tenant-1"))
	fmt.Fprintf(&out, "tenant tag of \"tenant-1\": %s\n", tenant)
	tokens := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	keys := pack.BlockKeys(id.Key(), tenant, tokens, 4)
	for i, k := range keys {
		fmt.Fprintf(&out, "block key %d of tokens 1..12, B=4: %s\n", i, k)
	}
	var chunks [][]byte
	var ids []pack.Digest
	for i := 0; i < 5; i++ {
		c := bytes.Repeat([]byte{byte(i + 1)}, 8)
		chunks = append(chunks, c)
		ids = append(ids, pack.ChunkID(c))
		fmt.Fprintf(&out, "chunk id of 8 bytes 0x%02x: %s\n", i+1, ids[i])
	}
	for n := 1; n <= 5; n++ {
		fmt.Fprintf(&out, "merkle root of chunks 1..%d: %s\n", n, pack.MerkleRoot(ids[:n]))
	}
	m := &pack.Manifest{
		Identity: id, BlockTokens: 4, Tenant: tenant, Tokens: tokens,
		Chunks:   []pack.ChunkRef{{ID: ids[0], Size: 8}, {ID: ids[1], Size: 8}, {ID: ids[0], Size: 8}},
		Producer: "node-a", Generation: 3, Created: time.Unix(1700000000, 5).UTC(),
	}
	m.Root = pack.MerkleRoot(m.ChunkIDs())
	mb, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&out, "manifest: %x\n", mb)
	fmt.Fprintf(&out, "pack id: %s\n", pack.PackID(mb))
	seal, err := pack.NewSeal([]byte("golden-secret-0123456789"), pack.PackID(mb), "node-a", 9, [pack.NonceSize]byte{0xaa, 0xbb})
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := seal.MarshalBinary()
	fmt.Fprintf(&out, "seal (key \"golden-secret-0123456789\", generation 9, nonce aabb00..): %x\n", sb)
	var file bytes.Buffer
	fw, err := pack.NewFileWriter(&file, mb, seal)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks[:2] {
		if err := fw.WriteChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&out, "export file: %s\n", hex.EncodeToString(file.Bytes()))

	path := filepath.Join("testdata", "vectors.golden")
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("format vectors changed:\ngot:\n%s\nwant:\n%s", out.Bytes(), want)
	}
}
