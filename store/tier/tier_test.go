package tier_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/tier"
	"github.com/muserhq/muser/store/tier/tiertest"
)

var testKey = bytes.Repeat([]byte("k"), 32)

// env is one S3 server with one bucket, and the way to open tiers on it.
type env struct {
	srv    *tiertest.Server
	bucket string
	prefix string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	srv := tiertest.Start(t)
	return &env{srv: srv, bucket: srv.Bucket(), prefix: "fleet/a"}
}

func (e *env) config(key []byte, producer string) tier.Config {
	return tier.Config{Location: tier.Location{Bucket: e.bucket, Prefix: e.prefix}, Endpoint: e.srv.Endpoint,
		AccessKey: tiertest.AccessKey, SecretKey: tiertest.SecretKey, Key: key, Producer: producer}
}

func (e *env) open(t *testing.T, key []byte, producer string) *tier.Tier {
	t.Helper()
	tr, err := tier.Open(e.config(key, producer))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// object reads an object of the bucket by its layout name.
func (e *env) object(t *testing.T, name string) []byte {
	t.Helper()
	o, err := e.srv.Client().GetObject(context.Background(), e.bucket, e.prefix+"/"+name, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(o); err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return b.Bytes()
}

// putObject overwrites an object of the bucket, as anyone with write
// access to the bucket could.
func (e *env) putObject(t *testing.T, name string, data []byte) {
	t.Helper()
	_, err := e.srv.Client().PutObject(context.Background(), e.bucket, e.prefix+"/"+name, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) removeObject(t *testing.T, name string) {
	t.Helper()
	if err := e.srv.Client().RemoveObject(context.Background(), e.bucket, e.prefix+"/"+name, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// fixture publishes a pack in a fresh store A and uploads it.
type fixture struct {
	*env
	tier   *tier.Tier
	a      *store.Store
	id     pack.Identity
	salt   []byte
	tokens []int32
	pack   pack.Digest
	m      *pack.Manifest
}

// fixtureRequest is the identity, salt and tokens of a fixture's pack.
type fixtureRequest struct {
	id     pack.Identity
	salt   []byte
	tokens []int32
}

// newFixtureTokens returns the identity, salt and tokens of the pack
// newFixture publishes (5 blocks of 16 tokens).
func newFixtureTokens() fixtureRequest {
	return fixtureRequest{id: packtest.Identity("tier"), salt: []byte("tenant-1"), tokens: packtest.Tokens(7, 16*5, 500)}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	e := newEnv(t)
	fx := newFixtureTokens()
	f := &fixture{env: e, tier: e.open(t, testKey, "node-a"), a: storetest.Open(t, "", store.Options{Node: "node-a", BlockTokens: 16}),
		id: fx.id, salt: fx.salt, tokens: fx.tokens}
	f.pack = storetest.Publish(t, f.a, f.id, f.salt, f.tokens, 96).Pack
	res, err := f.tier.Upload(context.Background(), f.a, f.pack)
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	if res.Existed || res.ChunksPut != 5 {
		t.Fatalf("upload: got %+v, want 5 chunks put and a new manifest", res)
	}
	m, err := f.a.Manifest(f.pack)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

// restoreAll restores tokens from s and returns the tokens restored and
// the blocks' bytes.
func restoreAll(t *testing.T, s *store.Store, id pack.Identity, salt []byte, tokens []int32) (int, [][]byte) {
	t.Helper()
	n, blocks, err := storetest.Restore(t, s, id, salt, tokens)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	return n, blocks
}

func TestUploadInstallRoundTrip(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// A second upload of the same pack finds the manifest and writes
	// nothing.
	res, err := f.tier.Upload(ctx, f.a, f.pack)
	if err != nil || !res.Existed || res.ChunksPut != 0 {
		t.Fatalf("second upload: got %+v, %v; want existed, nothing put", res, err)
	}
	b := storetest.Open(t, "", store.Options{Node: "node-b", BlockTokens: 16})
	tb := f.open(t, testKey, "node-b")
	ir, err := tb.Install(ctx, b, f.pack, f.id)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if !ir.New || ir.ChunksFetched != 5 || ir.Tokens != 80 {
		t.Fatalf("install: got %+v, want new, 5 chunks, 80 tokens", ir)
	}
	na, wantBlocks := restoreAll(t, f.a, f.id, f.salt, f.tokens)
	nb, gotBlocks := restoreAll(t, b, f.id, f.salt, f.tokens)
	if na != 80 || nb != na {
		t.Fatalf("restored %d tokens from B, %d from A; want 80 each", nb, na)
	}
	for i := range wantBlocks {
		if !bytes.Equal(gotBlocks[i], wantBlocks[i]) {
			t.Fatalf("block %d differs between A and B", i)
		}
	}
	// A stored manifest is read again and again, in any order: no replay
	// or stale-generation refusal. B drops the pack and installs it
	// again; then a newer pack and the older one again.
	if _, err := b.Remove(f.pack); err != nil {
		t.Fatal(err)
	}
	if ir, err := tb.Install(ctx, b, f.pack, f.id); err != nil || !ir.New || ir.ChunksFetched != 5 {
		t.Fatalf("install again: got %+v, %v; want it new, its 5 chunks fetched again", ir, err)
	}
	p2 := storetest.Publish(t, f.a, f.id, f.salt, packtest.Tokens(70, 32, 500), 96).Pack
	if _, err := f.tier.Upload(ctx, f.a, p2); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Install(ctx, b, p2, f.id); err != nil {
		t.Fatalf("install of a newer pack: %v", err)
	}
	if _, err := b.Remove(f.pack); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Install(ctx, b, f.pack, f.id); err != nil {
		t.Fatalf("install of the older pack after the newer: %v", err)
	}
	if rs, _ := b.Receipts(store.ReceiptFilter{}); len(rs) != 0 {
		t.Fatalf("B holds %d receipts, want 0", len(rs))
	}
	// Another tenant's salt finds nothing.
	if n, _ := restoreAll(t, b, f.id, []byte("tenant-2"), f.tokens); n != 0 {
		t.Fatalf("tenant-2 restored %d tokens of tenant-1's pack, want 0", n)
	}
	storetest.Check(t, b)
}

func TestManifestIsNeverOverwritten(t *testing.T) {
	f := newFixture(t)
	before := f.object(t, "manifests/"+f.pack.String())
	// A conditional put of another object under the same key is refused.
	_, err := f.srv.Client().PutObject(context.Background(), f.bucket, f.prefix+"/manifests/"+f.pack.String(),
		bytes.NewReader([]byte("other")), 5, func() minio.PutObjectOptions {
			var o minio.PutObjectOptions
			o.SetMatchETagExcept("*")
			return o
		}())
	if minio.ToErrorResponse(err).StatusCode != 412 {
		t.Fatalf("conditional put over an existing manifest: got %v, want 412 Precondition Failed", err)
	}
	if after := f.object(t, "manifests/"+f.pack.String()); !bytes.Equal(after, before) {
		t.Fatal("the manifest object changed")
	}
}

// refusalCase is a fault of a tier's pack, or of a reader, that a read
// refuses with a receipt.
type refusalCase struct {
	name   string
	damage func(t *testing.T, f *fixture)
	key    []byte
	expect func(f *fixture) pack.Identity
	reason pack.Reason
	// block is the first block whose chunk is damaged; -1 when the fault
	// is the manifest's or the reader's (no block may be read).
	block int
}

// refusalCases are the faults every way of reading a pack refuses.
func refusalCases() []refusalCase {
	return []refusalCase{
		{name: "chunk deleted", reason: pack.ReasonMissingChunk, block: 2, damage: func(t *testing.T, f *fixture) {
			f.removeObject(t, "chunks/"+f.m.Chunks[2].ID.String())
		}},
		{name: "chunk truncated", reason: pack.ReasonTruncated, block: 1, damage: func(t *testing.T, f *fixture) {
			c := f.object(t, "chunks/"+f.m.Chunks[1].ID.String())
			f.putObject(t, "chunks/"+f.m.Chunks[1].ID.String(), c[:len(c)/2])
		}},
		{name: "chunk extended", reason: pack.ReasonOversize, block: 4, damage: func(t *testing.T, f *fixture) {
			c := f.object(t, "chunks/"+f.m.Chunks[4].ID.String())
			f.putObject(t, "chunks/"+f.m.Chunks[4].ID.String(), append(c, 0))
		}},
		{name: "chunk bit-flipped", reason: pack.ReasonChunkDigest, block: 3, damage: func(t *testing.T, f *fixture) {
			c := f.object(t, "chunks/"+f.m.Chunks[3].ID.String())
			c[17] ^= 0x10
			f.putObject(t, "chunks/"+f.m.Chunks[3].ID.String(), c)
		}},
		{name: "manifest bit-flipped", reason: pack.ReasonManifestDigest, block: -1, damage: func(t *testing.T, f *fixture) {
			o := f.object(t, "manifests/"+f.pack.String())
			o[len(o)-9] ^= 1
			f.putObject(t, "manifests/"+f.pack.String(), o)
		}},
		{name: "manifest truncated", reason: pack.ReasonManifestDigest, block: -1, damage: func(t *testing.T, f *fixture) {
			o := f.object(t, "manifests/"+f.pack.String())
			f.putObject(t, "manifests/"+f.pack.String(), o[:len(o)-40])
		}},
		{name: "manifest sealed with a foreign key", reason: pack.ReasonBadSeal, block: -1, damage: func(t *testing.T, f *fixture) {
			mb, err := f.m.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			seal, err := pack.NewSeal(bytes.Repeat([]byte("x"), 32), f.pack, "mallory", 1, [pack.NonceSize]byte{1})
			if err != nil {
				t.Fatal(err)
			}
			o, err := tier.EncodeObject(seal, mb)
			if err != nil {
				t.Fatal(err)
			}
			f.putObject(t, "manifests/"+f.pack.String(), o)
		}},
		{name: "reader with another key", reason: pack.ReasonBadSeal, block: -1, key: bytes.Repeat([]byte("z"), 32)},
		{name: "another identity expected", reason: pack.ReasonIdentityMismatch, block: -1, expect: func(f *fixture) pack.Identity {
			return packtest.Identity("other")
		}},
	}
}

// reader returns the case's reader of f's tier and the identity it
// expects, once the case's damage is done.
func (tt refusalCase) reader(t *testing.T, f *fixture) (*tier.Tier, pack.Identity) {
	t.Helper()
	if tt.damage != nil {
		tt.damage(t, f)
	}
	key := testKey
	if tt.key != nil {
		key = tt.key
	}
	expect := f.id
	if tt.expect != nil {
		expect = tt.expect(f)
	}
	return f.open(t, key, "node-b"), expect
}

// checkRefused checks that err refused f's pack with one receipt in b
// naming the tier, for reason, and that b holds nothing of it.
func checkRefused(t *testing.T, f *fixture, b *store.Store, err error, reason pack.Reason) {
	t.Helper()
	var re *store.RefusalError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want a refusal", err)
	}
	if re.Receipt.Reason != reason || re.Receipt.ID == "" {
		t.Fatalf("receipt: got reason %q id %q, want %q with an ID", re.Receipt.Reason, re.Receipt.ID, reason)
	}
	if re.Receipt.Source != f.tier.Source() {
		t.Errorf("receipt source: got %q, want %q", re.Receipt.Source, f.tier.Source())
	}
	rs, err := b.Receipts(store.ReceiptFilter{})
	if err != nil || len(rs) != 1 {
		t.Fatalf("receipts in B: got %d (%v), want 1", len(rs), err)
	}
	if n, _ := restoreAll(t, b, f.id, f.salt, f.tokens); n != 0 {
		t.Fatalf("B restores %d tokens after a refusal, want 0", n)
	}
	if ps, _ := b.Packs(); len(ps) != 0 {
		t.Fatalf("B holds %d packs after a refusal, want 0", len(ps))
	}
	storetest.Check(t, b)
}

func TestInstallRefusals(t *testing.T) {
	for _, tt := range refusalCases() {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			tr, expect := tt.reader(t, f)
			b := storetest.Open(t, "", store.Options{Node: "node-b", BlockTokens: 16})
			_, err := tr.Install(context.Background(), b, f.pack, expect)
			checkRefused(t, f, b, err, tt.reason)
		})
	}
}

// TestInstallIgnoresTheReplayLedger: a node that accepted a pack from
// producer node-a over replication (or an export file) with a later
// generation still installs node-a's older tier manifests: stored
// manifests are not offers, and the replay ledger does not apply
// (store.AdmitOptions.Stored).
func TestInstallIgnoresTheReplayLedger(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	key := bytes.Repeat([]byte("s"), 32)
	a := storetest.Open(t, "", store.Options{Node: "node-a", BlockTokens: 16, SealKey: key})
	b := storetest.Open(t, "", store.Options{Node: "node-b", BlockTokens: 16, SealKey: key})
	id := packtest.Identity("replay")
	// The tier manifest is sealed at generation 0 (a clock at the epoch).
	cfg := e.config(testKey, "node-a")
	cfg.Now = func() time.Time { return time.Unix(0, 0) }
	old, err := tier.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p1 := storetest.Publish(t, a, id, nil, packtest.Tokens(1, 32, 500), 64).Pack
	if _, err := old.Upload(ctx, a, p1); err != nil {
		t.Fatal(err)
	}
	// B imports another of node-a's packs (generation 1 in its ledger).
	p2 := storetest.Publish(t, a, id, nil, packtest.Tokens(2, 32, 500), 64).Pack
	var exp bytes.Buffer
	if err := a.Export(ctx, p2, &exp); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Import(ctx, &exp, store.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	// An offer sealed at generation 0 would now be stale...
	seal, mb, _, err := old.Manifest(ctx, p1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Admit(ctx, store.Offer{Manifest: mb, Seal: seal}, store.AdmitOptions{Key: testKey}); store.ReasonOf(err) != pack.ReasonStaleGeneration {
		t.Fatalf("admit as an offer: got %v, want a stale-generation refusal", err)
	}
	// ...but the stored manifest installs.
	if _, err := e.open(t, testKey, "node-b").Install(ctx, b, p1, id); err != nil {
		t.Fatalf("install: got %v, want nil", err)
	}
	storetest.Check(t, b)
}
