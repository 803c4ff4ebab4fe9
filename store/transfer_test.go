package store_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/zeebo/blake3"
)

var clusterKey = []byte("shared-cluster-secret-0123")

func TestExportImport(t *testing.T) {
	src := storetest.Open(t, "", store.Options{BlockTokens: 4, SealKey: clusterKey, Node: "node-a"})
	dst := storetest.Open(t, "", store.Options{BlockTokens: 4, SealKey: clusterKey, Node: "node-b"})
	id := packtest.Identity("x")
	toks := packtest.Tokens(30, 20, 500)
	p := storetest.Publish(t, src, id, salt, toks, 48).Pack
	file := filepath.Join(t.TempDir(), "p.kvpack")
	exportTo(t, src, p, file)
	res, err := importFrom(t, dst, file, nil)
	if err != nil || res.Pack != p || !res.New || res.ChunksWritten != 5 {
		t.Fatalf("import: got %+v, %v; want new pack %s with 5 chunks", res, err, p.Short())
	}
	n, blocks, err := storetest.Restore(t, dst, id, salt, toks)
	if err != nil || n != 20 {
		t.Fatalf("restore imported pack: %d tokens, %v", n, err)
	}
	_, want, _ := storetest.Restore(t, src, id, salt, toks)
	for i := range blocks {
		if !bytes.Equal(blocks[i], want[i]) {
			t.Fatalf("block %d differs after transfer", i)
		}
	}
	// The same file again: its seal's nonce was accepted.
	_, err = importFrom(t, dst, file, nil)
	var re *store.RefusalError
	if !errors.As(err, &re) || re.Receipt.Reason != pack.ReasonReplay {
		t.Fatalf("re-import: got %v, want a replay refusal", err)
	}
	// A fresh export of the same pack: new nonce and generation; the pack
	// already exists, so nothing is written.
	exportTo(t, src, p, file)
	res, err = importFrom(t, dst, file, nil)
	if err != nil || res.New || res.ChunksWritten != 0 {
		t.Fatalf("second export: got %+v, %v; want the existing pack", res, err)
	}
	info, _ := dst.Pack(p)
	if info.Source == "" || info.Source == store.SourceLocal {
		t.Fatalf("imported pack's source: got %q", info.Source)
	}
}

// TestImportRefusals: a file that does not verify is refused with a
// receipt of the right reason, and leaves no visible pack.
func TestImportRefusals(t *testing.T) {
	src := storetest.Open(t, "", store.Options{BlockTokens: 4, SealKey: clusterKey})
	id := packtest.Identity("x")
	p := storetest.Publish(t, src, id, salt, packtest.Tokens(31, 12, 500), 48).Pack
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	exportTo(t, src, p, good)
	old := filepath.Join(dir, "old")
	exportTo(t, src, p, old) // generation g
	newer := filepath.Join(dir, "newer")
	exportTo(t, src, p, newer) // generation g+1
	data := mustRead(t, good)
	mod := func(f func([]byte) []byte) string {
		path := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(path, f(bytes.Clone(data)), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name   string
		key    []byte
		before string // imported first
		file   string
		reason pack.Reason
	}{
		{"truncated", clusterKey, "", mod(func(b []byte) []byte { return b[:len(b)-50] }), pack.ReasonTruncated},
		{"chunk byte", clusterKey, "", mod(func(b []byte) []byte { b[len(b)-60] ^= 1; return b }), pack.ReasonChunkDigest},
		{"trailer", clusterKey, "", mod(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), pack.ReasonManifestDigest},
		{"not a pack", clusterKey, "", mod(func(b []byte) []byte { return []byte("hello world, not a pack") }), pack.ReasonMalformed},
		{"wrong key", []byte("some-other-cluster-secret"), "", good, pack.ReasonBadSeal},
		{"stale generation", clusterKey, newer, old, pack.ReasonStaleGeneration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := storetest.Open(t, "", store.Options{BlockTokens: 4, SealKey: tt.key, OrphanGrace: -1})
			if tt.before != "" {
				if _, err := importFrom(t, dst, tt.before, nil); err != nil {
					t.Fatal(err)
				}
				if _, err := dst.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
			_, err := importFrom(t, dst, tt.file, nil)
			var re *store.RefusalError
			if !errors.As(err, &re) || !errors.Is(err, pack.ErrRefused) {
				t.Fatalf("got %v, want a refusal", err)
			}
			if re.Receipt.Reason != tt.reason || re.Receipt.ID == "" {
				t.Fatalf("receipt: got %+v, want reason %s", re.Receipt, tt.reason)
			}
			if ps, _ := dst.Packs(); len(ps) != 0 {
				t.Fatalf("refused import left %d visible packs", len(ps))
			}
			// Whatever chunks it wrote are orphans that gc reclaims.
			if _, err := dst.GC(context.Background(), store.GCOptions{MaxBytes: -1}); err != nil {
				t.Fatal(err)
			}
			if left := dataFiles(t, dst.Dir()); len(left) != 0 {
				t.Fatalf("files left after gc: %v", left)
			}
		})
	}
}

// TestReplicationPrimitives: the chunk layer replication uses. A partially
// received pack leaves verified chunks on disk and no visible pack; gc
// keeps them through the grace period and reclaims them after it.
func TestReplicationPrimitives(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	src := storetest.Open(t, "", store.Options{BlockTokens: 4, SealKey: clusterKey, Node: "node-a"})
	dst := storetest.Open(t, "", store.Options{BlockTokens: 4, SealKey: clusterKey, Now: clock.Now})
	id := packtest.Identity("rp")
	toks := packtest.Tokens(40, 16, 500)
	p := storetest.Publish(t, src, id, salt, toks, 32).Pack
	mb := mustRead(t, manifestFile(src.Dir(), p))
	m, _ := src.Manifest(p)
	seal, err := pack.NewSeal(clusterKey, p, "node-a", 1, [pack.NonceSize]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, missing, err := dst.Admit(ctx, store.Offer{Manifest: mb, Seal: seal}, store.AdmitOptions{Source: "peer:node-a"})
	if err != nil || len(missing) != 4 {
		t.Fatalf("admit: %d missing, %v; want 4", len(missing), err)
	}
	// A chunk whose bytes do not match its ID is refused.
	good := mustRead(t, chunkFile(src.Dir(), missing[0]))
	bad := bytes.Clone(good)
	bad[0] ^= 1
	err = dst.PutChunk(ctx, missing[0], bad, "peer:node-a")
	var re *store.RefusalError
	if !errors.As(err, &re) || re.Receipt.Reason != pack.ReasonChunkDigest || re.Receipt.Source != "peer:node-a" {
		t.Fatalf("bad chunk: got %v, want a chunk-digest refusal naming the peer", err)
	}
	// Half the chunks arrive, then the transfer stops.
	for _, c := range missing[:2] {
		if err := dst.PutChunk(ctx, c, mustRead(t, chunkFile(src.Dir(), c)), "peer:node-a"); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = dst.PublishPack(ctx, m, store.PublishOptions{Seal: &seal, Source: "peer:node-a"})
	var mce *store.MissingChunksError
	if !errors.As(err, &mce) || len(mce.Chunks) != 2 {
		t.Fatalf("publish with chunks missing: got %v, want 2 missing", err)
	}
	if ps, _ := dst.Packs(); len(ps) != 0 {
		t.Fatal("partial transfer is visible")
	}
	if still, _ := dst.MissingChunks(m.Chunks); len(still) != 2 {
		t.Fatalf("after two chunks: %d missing, want 2", len(still))
	}
	rep, err := dst.GC(ctx, store.GCOptions{MaxBytes: -1})
	if err != nil || rep.Orphans != 0 {
		t.Fatalf("gc within the grace period removed %d orphans (%v)", rep.Orphans, err)
	}
	clock.mu.Lock()
	clock.t = clock.t.Add(2 * store.DefaultOrphanGrace)
	clock.mu.Unlock()
	rep, err = dst.GC(ctx, store.GCOptions{MaxBytes: -1})
	if err != nil || rep.Orphans != 2 {
		t.Fatalf("gc past the grace period: removed %d orphans (%v), want 2", rep.Orphans, err)
	}
	// The sender retries: all chunks, then the manifest.
	for _, c := range m.ChunkIDs() {
		if err := dst.PutChunk(ctx, c, mustRead(t, chunkFile(src.Dir(), c)), "peer:node-a"); err != nil {
			t.Fatal(err)
		}
	}
	got, isNew, err := dst.PublishPack(ctx, m, store.PublishOptions{Seal: &seal, Source: "peer:node-a"})
	if err != nil || !isNew || got != p {
		t.Fatalf("publish: got %s new=%v, %v", got.Short(), isNew, err)
	}
	// The seal is now spent.
	if _, _, err := dst.Admit(ctx, store.Offer{Manifest: mb, Seal: seal}, store.AdmitOptions{Source: "peer:node-a"}); !errors.As(err, &re) || re.Receipt.Reason != pack.ReasonReplay {
		t.Fatalf("replayed offer: got %v, want replay", err)
	}
	seal2, _ := pack.NewSeal(clusterKey, p, "node-a", 1, [pack.NonceSize]byte{2})
	if _, _, err := dst.Admit(ctx, store.Offer{Manifest: mb, Seal: seal2}, store.AdmitOptions{Source: "peer:node-a"}); !errors.As(err, &re) || re.Receipt.Reason != pack.ReasonStaleGeneration {
		t.Fatalf("same generation, new nonce: got %v, want stale-generation", err)
	}
}

// TestDivergentRefused: a manifest whose chunk for a block key differs
// from the one the store holds is refused.
func TestDivergentRefused(t *testing.T) {
	s := storetest.Open(t, "", store.Options{BlockTokens: 4, OrphanGrace: -1})
	id := packtest.Identity("dv")
	toks := packtest.Tokens(50, 8, 500)
	storetest.Publish(t, s, id, salt, toks[:4], 32)
	m, chunks := packtest.Manifest(id, salt, toks, 4, 32)
	chunks[0][0] ^= 1 // other KV for block 0
	m.Chunks[0].ID = pack.ChunkID(chunks[0])
	m.Root = pack.MerkleRoot(m.ChunkIDs())
	ctx := context.Background()
	for i, c := range chunks {
		if err := s.PutChunk(ctx, m.Chunks[i].ID, c, "peer:x"); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := s.PublishPack(ctx, m, store.PublishOptions{Source: "peer:x"})
	var re *store.RefusalError
	if !errors.As(err, &re) || re.Receipt.Reason != pack.ReasonDivergent {
		t.Fatalf("got %v, want a divergent refusal", err)
	}
	if _, err := s.GC(ctx, store.GCOptions{MaxBytes: -1}); err != nil {
		t.Fatal(err)
	}
}

// TestLongSourceRecordDecodes: a pack record's source is a u16-length
// string that the ledger's decoder bounds (docs/kvpack.md, "Ledger"). An
// import whose source ("import:PATH") is longer than that bound (a deep
// path) must still leave a record the store reads back: the pack listed,
// its source the start of the one given, and the store check clean.
func TestLongSourceRecordDecodes(t *testing.T) {
	src := storetest.Open(t, "", store.Options{BlockTokens: 4, SealKey: clusterKey, Node: "node-a"})
	id := packtest.Identity("long-source")
	p := storetest.Publish(t, src, id, salt, packtest.Tokens(31, 8, 500), 48).Pack
	for _, source := range []string{
		"import:" + strings.Repeat("d", 1017), // 1024 bytes: kept whole
		"import:" + strings.Repeat("d", 1018),
		"import:" + strings.Repeat("d", 4096),
		"import:" + strings.Repeat("d", 70000), // over a u16
		"import:" + strings.Repeat("é", 600),   // cut between characters
	} {
		t.Run(fmt.Sprint(len(source)), func(t *testing.T) {
			dst := storetest.Open(t, "", store.Options{BlockTokens: 4, SealKey: clusterKey, Node: "node-b"})
			var file bytes.Buffer
			if err := src.Export(context.Background(), p, &file); err != nil {
				t.Fatal(err)
			}
			if _, err := dst.Import(context.Background(), &file, store.ImportOptions{Source: source}); err != nil {
				t.Fatal(err)
			}
			info, err := dst.Pack(p)
			if err != nil {
				t.Fatalf("Pack after an import with a %d-byte source: %v", len(source), err)
			}
			if len(info.Source) > 1024 || !strings.HasPrefix(source, info.Source) || len(info.Source) < 1000 || !utf8.ValidString(info.Source) {
				t.Fatalf("source of %d bytes recorded as %d bytes, want the first (at most 1024) bytes of it", len(source), len(info.Source))
			}
			if ps, err := dst.Packs(); err != nil || len(ps) != 1 {
				t.Fatalf("Packs = %d packs, %v; want the imported one", len(ps), err)
			}
		})
	}
}

// TestImportRefusesChunkOfTwoSizes: a chunk ID names one byte string, so a
// manifest that gives one chunk ID two sizes describes no pack. An export
// file carrying one, sealed under the right key and with a correct root
// (the root covers IDs, not sizes), is refused with a receipt like any
// other malformed file and leaves no visible pack. The file is built by
// hand from docs/kvpack.md ("Export file"), since the writer refuses such
// a manifest.
func TestImportRefusesChunkOfTwoSizes(t *testing.T) {
	m, chunks := packtest.Manifest(packtest.Identity("two-sizes"), salt, packtest.Tokens(32, 8, 500), 4, 48)
	m.Chunks[1] = m.Chunks[0] // one chunk, repeated: a valid manifest
	m.Root = pack.MerkleRoot(m.ChunkIDs())
	mb, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// Chunk 1's size, the last 4 bytes of the chunk references, plus one.
	sizeOff := len(mb) - 8 - 8 - (2 + len(m.Producer)) - 32 - 4
	binary.LittleEndian.PutUint32(mb[sizeOff:], m.Chunks[0].Size+1)
	seal, err := pack.NewSeal(clusterKey, pack.PackID(mb), "node-x", 1, [pack.NonceSize]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := seal.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	f := []byte(pack.FileMagic)
	f = binary.LittleEndian.AppendUint32(f, pack.FormatVersion)
	f = binary.LittleEndian.AppendUint32(f, uint32(len(mb)))
	f = append(f, mb...)
	f = binary.LittleEndian.AppendUint32(f, uint32(len(sb)))
	f = append(f, sb...)
	f = binary.LittleEndian.AppendUint32(f, 1) // one distinct chunk
	f = binary.LittleEndian.AppendUint32(f, uint32(len(chunks[0])))
	f = append(f, chunks[0]...)
	f = append(f, pack.FileEndMagic...)
	var digest [32]byte
	blake3.DeriveKey("muser kvpack v1 export file", f, digest[:])
	f = append(f, digest[:]...)

	dst := storetest.Open(t, "", store.Options{BlockTokens: 4, SealKey: clusterKey})
	_, err = dst.Import(context.Background(), bytes.NewReader(f), store.ImportOptions{Source: "import:two-sizes"})
	var re *store.RefusalError
	if !errors.As(err, &re) || re.Receipt.Reason != pack.ReasonMalformed || re.Receipt.ID == "" {
		t.Fatalf("Import = %v, want a malformed refusal with a receipt", err)
	}
	if ps, _ := dst.Packs(); len(ps) != 0 {
		t.Fatalf("refused import left %d visible packs", len(ps))
	}
}

// TestReplayOfExistingPackRefused: an offer accepted for a pack the store
// already holds spends its seal like one that adds the pack, so the same
// file offered again is a replay, also once the pack has gone.
func TestReplayOfExistingPackRefused(t *testing.T) {
	src := storetest.Open(t, "", store.Options{BlockTokens: 4, SealKey: clusterKey, Node: "node-a"})
	dst := storetest.Open(t, "", store.Options{BlockTokens: 4, SealKey: clusterKey, Node: "node-b"})
	id := packtest.Identity("x")
	p := storetest.Publish(t, src, id, salt, packtest.Tokens(32, 12, 500), 48).Pack
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	exportTo(t, src, p, first)
	exportTo(t, src, p, second)
	if res, err := importFrom(t, dst, first, nil); err != nil || !res.New {
		t.Fatalf("first import: got %+v, %v; want a new pack", res, err)
	}
	if res, err := importFrom(t, dst, second, nil); err != nil || res.New {
		t.Fatalf("second import: got %+v, %v; want the existing pack", res, err)
	}
	// The second file's seal was accepted: offering it again is a replay,
	// whether or not the pack is still there.
	for _, removed := range []bool{false, true} {
		if removed {
			if _, err := dst.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		res, err := importFrom(t, dst, second, nil)
		var re *store.RefusalError
		if !errors.As(err, &re) || re.Receipt.Reason != pack.ReasonReplay {
			t.Fatalf("second file again (pack removed: %v): got %+v, %v; want a replay refusal", removed, res, err)
		}
	}
	if ps, _ := dst.Packs(); len(ps) != 0 {
		t.Fatalf("a replayed file published %d packs", len(ps))
	}
}
