package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

func chunkFile(dir string, id pack.Digest) string {
	h := id.String()
	return filepath.Join(dir, "chunks", h[:2], h)
}

func manifestFile(dir string, id pack.Digest) string {
	h := id.String()
	return filepath.Join(dir, "packs", h[:2], h)
}

func flip(t *testing.T, path string, i int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[i] ^= 0x20
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Size())
}

// findingPacks returns the packs the findings name.
func findingPacks(rep store.VerifyReport) map[pack.Digest]bool {
	out := map[pack.Digest]bool{}
	for _, f := range rep.Findings {
		var pe *store.PackError
		if errors.As(f, &pe) {
			out[pe.Pack] = true
		}
	}
	return out
}

// TestTamperEveryByte flips every byte of every chunk file and of the
// manifest of one pack in turn: verify must name that pack (and only
// it) every time, and find nothing once the byte is restored.
func TestTamperEveryByte(t *testing.T) {
	s := storetest.Open(t, "", store.Options{BlockTokens: 4})
	dir := s.Dir()
	id := packtest.Identity("t")
	a := storetest.Publish(t, s, id, salt, packtest.Tokens(10, 12, 500), 24).Pack
	b := storetest.Publish(t, s, id, salt, packtest.Tokens(11, 8, 500), 24).Pack
	m, err := s.Manifest(a)
	if err != nil {
		t.Fatal(err)
	}
	files := []string{manifestFile(dir, a)}
	for _, c := range m.Chunks {
		files = append(files, chunkFile(dir, c.ID))
	}
	ctx := context.Background()
	for _, f := range files {
		for i := 0; i < fileSize(t, f); i++ {
			flip(t, f, i)
			rep, err := s.Verify(ctx, store.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := findingPacks(rep)
			if !got[a] || got[b] || len(rep.Findings) == 0 {
				t.Fatalf("%s byte %d flipped: findings %v; want pack %s named, %s not", filepath.Base(f), i, rep.Findings, a.Short(), b.Short())
			}
			flip(t, f, i)
		}
	}
	if rep, _ := s.Verify(ctx, store.VerifyOptions{}); len(rep.Findings) != 0 {
		t.Fatalf("after restoring every byte: %v", rep.Findings)
	}
}

// TestTamperRestoreRefused: a restore of a pack with a flipped chunk byte
// or manifest byte is refused, quarantines the pack and leaves a receipt
// with the expected and actual digests.
func TestTamperRestoreRefused(t *testing.T) {
	for _, target := range []string{"chunk", "manifest"} {
		t.Run(target, func(t *testing.T) {
			s := storetest.Open(t, "", store.Options{BlockTokens: 4})
			id := packtest.Identity("t")
			toks := packtest.Tokens(12, 16, 500)
			p := storetest.Publish(t, s, id, salt, toks, 24).Pack
			m, _ := s.Manifest(p)
			var path string
			var want pack.Reason
			var expected pack.Digest
			if target == "chunk" {
				path, want, expected = chunkFile(s.Dir(), m.Chunks[2].ID), pack.ReasonChunkDigest, m.Chunks[2].ID
			} else {
				path, want, expected = manifestFile(s.Dir(), p), pack.ReasonManifestDigest, p
			}
			flip(t, path, 5)
			actual := pack.ChunkID(mustRead(t, path))
			if target == "manifest" {
				actual = pack.PackID(mustRead(t, path))
			}
			put := 0
			n, err := s.Restore(context.Background(), id, salt, toks, func(int, []byte) error { put++; return nil })
			var re *store.RefusalError
			if !errors.As(err, &re) || !errors.Is(err, pack.ErrRefused) || n != 0 {
				t.Fatalf("restore: got %d, %v; want a refusal", n, err)
			}
			if target == "manifest" && put != 0 {
				t.Fatalf("put called %d times before the manifest was verified", put)
			}
			if target == "chunk" && put != 2 {
				t.Fatalf("put called %d times, want 2 (blocks before the bad chunk)", put)
			}
			r := re.Receipt
			if r.Reason != want || r.Pack != p || r.Expected != expected || r.Actual != actual || r.ID == "" {
				t.Fatalf("receipt: got %+v; want %s for pack %s, expected %s actual %s", r, want, p.Short(), expected.Short(), actual.Short())
			}
			stored, err := s.Receipt(r.ID)
			if err != nil || stored.Reason != want || stored.Expected != expected {
				t.Fatalf("stored receipt: got %+v, %v", stored, err)
			}
			info, _ := s.Pack(p)
			if !info.Quarantined {
				t.Fatal("pack not quarantined")
			}
			if mt, _ := s.Match(id, salt, toks); mt.Tokens != 0 {
				t.Fatalf("quarantined pack still matched (%d tokens)", mt.Tokens)
			}
			if _, err := s.Remove(p); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mutateField(id pack.Identity, i int) pack.Identity {
	switch i {
	case 0:
		id.Format++
	case 1:
		id.Model[3] ^= 1
	case 2:
		id.Arch += ";x"
	case 3:
		id.Tokenizer[0] ^= 1
	case 4:
		id.Template[0] ^= 1
	case 5:
		id.Quant = "Q4_K"
	case 6:
		id.KV = "f32;block=4;layout=lkv1"
	case 7:
		id.Engine = "muser-test/2"
	}
	return id
}

// TestIdentityRefusal: restoring a pack under an identity that differs in
// exactly one of the eight fields is refused, and the receipt names that
// field with both values. The pack itself stays usable.
func TestIdentityRefusal(t *testing.T) {
	s := storetest.Open(t, "", store.Options{BlockTokens: 4})
	id := packtest.Identity("i")
	toks := packtest.Tokens(13, 8, 500)
	p := storetest.Publish(t, s, id, salt, toks, 24).Pack
	for i, field := range pack.IdentityFields {
		t.Run(field, func(t *testing.T) {
			other := mutateField(id, i)
			_, err := s.RestorePack(context.Background(), store.RestoreRequest{Pack: p, Identity: other},
				func(int, []byte) error { t.Fatal("put called on a refused restore"); return nil })
			var re *store.RefusalError
			if !errors.As(err, &re) || !errors.Is(err, pack.ErrRefused) {
				t.Fatalf("got %v, want a refusal", err)
			}
			r := re.Receipt
			if r.Reason != pack.ReasonIdentityMismatch || len(r.Fields) != 1 {
				t.Fatalf("receipt: got reason %s fields %v, want identity-mismatch with one field", r.Reason, r.Fields)
			}
			want := other.Diff(id)[0]
			if got := r.Fields[0]; got != want || got.Field != field {
				t.Fatalf("receipt field: got %+v, want %+v", got, want)
			}
			stored, err := s.Receipt(r.ID)
			if err != nil || len(stored.Fields) != 1 || stored.Fields[0] != want {
				t.Fatalf("stored receipt: got %+v, %v", stored, err)
			}
		})
	}
	n, err := s.RestorePack(context.Background(), store.RestoreRequest{Pack: p, Identity: id}, func(int, []byte) error { return nil })
	if err != nil || n != 8 {
		t.Fatalf("restore under the right identity: got %d, %v", n, err)
	}
	rs, _ := s.Receipts(store.ReceiptFilter{Reason: pack.ReasonIdentityMismatch})
	if len(rs) != 8 {
		t.Fatalf("got %d identity-mismatch receipts, want 8", len(rs))
	}
}

// TestImportIdentityRefusal: an export file offered to a receiver that
// expects another identity is refused naming exactly the differing field.
func TestImportIdentityRefusal(t *testing.T) {
	src := storetest.Open(t, "", store.Options{BlockTokens: 4, SealKey: []byte("shared-cluster-secret-0123")})
	id := packtest.Identity("e")
	p := storetest.Publish(t, src, id, salt, packtest.Tokens(14, 8, 500), 24).Pack
	for i, field := range pack.IdentityFields {
		t.Run(field, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "p.kvpack")
			exportTo(t, src, p, file)
			dst := storetest.Open(t, "", store.Options{BlockTokens: 4, SealKey: []byte("shared-cluster-secret-0123")})
			want := mutateField(id, i)
			_, err := importFrom(t, dst, file, &want)
			var re *store.RefusalError
			if !errors.As(err, &re) || re.Receipt.Reason != pack.ReasonIdentityMismatch || len(re.Receipt.Fields) != 1 || re.Receipt.Fields[0].Field != field {
				t.Fatalf("got %v, want identity-mismatch naming %s", err, field)
			}
			if ps, _ := dst.Packs(); len(ps) != 0 {
				t.Fatalf("refused import left %d packs", len(ps))
			}
		})
	}
}

func exportTo(t *testing.T, s *store.Store, p pack.Digest, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := s.Export(context.Background(), p, f); err != nil {
		t.Fatal(err)
	}
}

func importFrom(t *testing.T, s *store.Store, path string, expect *pack.Identity) (store.ImportResult, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return s.Import(context.Background(), f, store.ImportOptions{Expect: expect, Source: "import:" + strconv.Quote(filepath.Base(path))})
}

var _ = fmt.Sprint

// TestMissingChunkRefused: a chunk file deleted behind the store's back
// makes a restore fail closed with a missing-chunk receipt naming the
// block and chunk, and quarantines the pack.
func TestMissingChunkRefused(t *testing.T) {
	s := storetest.Open(t, "", store.Options{BlockTokens: 4})
	id := packtest.Identity("m")
	toks := packtest.Tokens(15, 12, 500)
	p := storetest.Publish(t, s, id, salt, toks, 24).Pack
	m, _ := s.Manifest(p)
	if err := os.Remove(chunkFile(s.Dir(), m.Chunks[1].ID)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Restore(context.Background(), id, salt, toks, func(int, []byte) error { return nil })
	var re *store.RefusalError
	if !errors.As(err, &re) || re.Receipt.Reason != pack.ReasonMissingChunk || re.Receipt.Chunk != m.Chunks[1].ID ||
		re.Receipt.Block == nil || *re.Receipt.Block != 1 {
		t.Fatalf("got %v (receipt %+v), want missing-chunk for block 1", err, re)
	}
	if info, _ := s.Pack(p); !info.Quarantined {
		t.Fatal("pack not quarantined")
	}
	if _, err := s.Remove(p); err != nil {
		t.Fatal(err)
	}
}
