package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/muserhq/muser/pack"
	bolt "go.etcd.io/bbolt"
)

// maxNonces is how many nonces the replay ledger keeps per producer; older
// ones are also covered by the generation rule.
const maxNonces = 4096

// checkReplay applies the replay ledger to seal (rule T2): a nonce already
// seen from its producer is errReplay, a generation not greater than the
// last accepted is errStale. With record set it then records both.
func (s *Store) checkReplay(tx *bolt.Tx, seal *pack.Seal, record bool) error {
	rb := tx.Bucket(bucketReplay)
	pb := rb.Bucket([]byte(seal.Producer))
	if pb != nil {
		c := pb.Cursor()
		for k, _ := c.Seek([]byte{'n'}); k != nil && k[0] == 'n'; k, _ = c.Next() {
			if len(k) == 1+8+pack.NonceSize && bytes.Equal(k[9:], seal.Nonce[:]) {
				return fmt.Errorf("%w: nonce %x from producer %q was already accepted (generation %d)", errReplay, seal.Nonce, seal.Producer, binary.BigEndian.Uint64(k[1:9]))
			}
		}
		if last, ok := getU64(pb.Get(replayLast)); ok && seal.Generation <= last {
			return fmt.Errorf("%w: generation %d from producer %q is not greater than the last accepted, %d", errStale, seal.Generation, seal.Producer, last)
		}
	}
	if !record {
		return nil
	}
	pb, err := rb.CreateBucketIfNotExists([]byte(seal.Producer))
	if err != nil {
		return err
	}
	if err := pb.Put(replayLast, u64bytes(seal.Generation)); err != nil {
		return err
	}
	k := append([]byte{'n'}, binary.BigEndian.AppendUint64(nil, seal.Generation)...)
	if err := pb.Put(append(k, seal.Nonce[:]...), nil); err != nil {
		return err
	}
	// Keep the newest maxNonces (keys sort by generation).
	n := 0
	c := pb.Cursor()
	for k, _ := c.Seek([]byte{'n'}); k != nil && k[0] == 'n'; k, _ = c.Next() {
		n++
	}
	for ; n > maxNonces; n-- {
		k, _ := c.Seek([]byte{'n'})
		if k == nil || k[0] != 'n' {
			break
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// Offer is a sealed manifest offered by a sender: replication's first
// message and an export file's head.
type Offer struct {
	// Manifest is the manifest's canonical encoding.
	Manifest []byte
	// Seal authenticates it.
	Seal pack.Seal
}

// AdmitOptions say what a receiver expects of an offer.
type AdmitOptions struct {
	// Key is the secret the seal must verify under (nil: the store's).
	Key []byte
	// Expect, when non-nil, is the identity the receiver wants; an offer
	// differing in any field is refused naming each differing field.
	// Independently, a format other than pack.FormatVersion is refused.
	Expect *pack.Identity
	// Source names the sender in receipts ("peer:NAME", "import:PATH").
	Source string
	// Stored marks an offer read from shared storage (the fleet tier)
	// rather than sent: such a sealed manifest is meant to be read again
	// and again, in any order, so the replay ledger is not consulted (and
	// PublishPack must then be called without a Seal). Everything else is
	// checked as for a sent offer.
	Stored bool
}

// Admit checks an offer before any chunk is transferred (rule T1): the
// manifest decodes, the seal verifies, the replay ledger has not seen its
// nonce or a later generation, the identity is the expected one, the block
// size is the store's and the Merkle root checks. It changes nothing but
// receipts: the replay ledger advances when PublishPack commits. A
// refusal returns a *RefusalError with a receipt. On success it returns
// the decoded manifest and the chunk IDs the store lacks, in manifest
// order without repeats.
func (s *Store) Admit(ctx context.Context, o Offer, opts AdmitOptions) (*pack.Manifest, []pack.Digest, error) {
	if err := s.checkOpen(); err != nil {
		return nil, nil, err
	}
	pid := pack.PackID(o.Manifest)
	refuse := func(err error) error { return s.refuse(pid, opts.Source, err) }
	m, err := pack.DecodeManifest(o.Manifest)
	if err != nil {
		return nil, nil, refuse(err)
	}
	key := opts.Key
	if key == nil {
		key = s.key
	}
	if key == nil {
		return nil, nil, refuse(&pack.SealError{Producer: o.Seal.Producer, Problem: "the store has no seal key to check it with"})
	}
	if err := o.Seal.Verify(key, pid); err != nil {
		return nil, nil, refuse(err)
	}
	if !opts.Stored {
		if err := s.db.View(func(tx *bolt.Tx) error { return s.checkReplay(tx, &o.Seal, false) }); err != nil {
			return nil, nil, refuse(err)
		}
	}
	want := m.Identity
	want.Format = pack.FormatVersion
	if opts.Expect != nil {
		want = *opts.Expect
	}
	if err := want.Check(m.Identity); err != nil {
		return nil, nil, refuse(err)
	}
	if m.BlockTokens != s.block {
		return nil, nil, refuse(fmt.Errorf("%w: the pack has %d-token blocks, the store %d", errBlockSize, m.BlockTokens, s.block))
	}
	if err := m.CheckRoot(); err != nil {
		return nil, nil, refuse(err)
	}
	missing, err := s.MissingChunks(m.Chunks)
	return m, missing, err
}

// MissingChunks returns the IDs of the chunks in refs that the store does
// not hold (holds: a regular file of the chunk's size under its ID), in
// order and without repeats. A damaged file of another size, or a link or
// directory in a chunk's place, is missing: a transfer that skipped it
// could not publish.
func (s *Store) MissingChunks(refs []pack.ChunkRef) ([]pack.Digest, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	seen := map[pack.Digest]bool{}
	var out []pack.Digest
	for _, c := range refs {
		if seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		if !s.holds(c) {
			out = append(out, c.ID)
		}
	}
	return out, nil
}

// holds reports whether the store holds chunk c as rule W4 asks before
// reusing a file: a regular file of the chunk's size under its ID (its
// bytes are verified whenever they are read). Publish, Admit, PublishPack
// and ChunkSink all decide with it.
func (s *Store) holds(c pack.ChunkRef) bool {
	fi, err := s.fs.Stat(s.chunkPath(c.ID))
	return err == nil && fi.Mode().IsRegular() && fi.Size() == int64(c.Size)
}

// PutChunk verifies data against id and writes it as rule W1 asks (a
// temporary file, written, fsynced, renamed to the ID), without making any
// pack visible: until a manifest that names it is published, the chunk is
// an orphan that gc reclaims after the grace period. The fsync of the
// chunk's directory, which makes the rename durable, is owed to the next
// ledger commit (PublishPack pays it before committing), so a crash before
// then may lose the chunk but never a chunk a pack names. Bytes that do not
// hash to id are refused with a receipt naming source. PutChunk is
// PutPackChunk without a pack to name in receipts.
func (s *Store) PutChunk(ctx context.Context, id pack.Digest, data []byte, source string) error {
	return s.PutPackChunk(ctx, pack.Digest{}, id, data, source)
}

// PutPackChunk is PutChunk for a chunk received for pack pid (an offer
// Admit accepted): a refusal's receipt names the pack as well as the
// source.
func (s *Store) PutPackChunk(ctx context.Context, pid, id pack.Digest, data []byte, source string) error {
	if err := s.checkWritable(); err != nil {
		return err
	}
	if len(data) == 0 || len(data) > pack.MaxChunkBytes {
		return s.refuse(pid, source, &pack.LimitError{Object: "chunk " + id.Short(), Field: "size", Got: uint64(len(data)), Max: pack.MaxChunkBytes})
	}
	if got := pack.ChunkID(data); got != id {
		return s.refuse(pid, source, &pack.DigestError{Kind: pack.DigestChunk, Object: "received chunk", Expected: id, Actual: got})
	}
	defer s.lease(id)()
	_, err := s.putChunk(id, data)
	return err
}

// PublishOptions qualify PublishPack.
type PublishOptions struct {
	// Seal, when non-nil, is the offer's seal: the replay ledger is
	// checked again and advanced in the commit's transaction.
	Seal *pack.Seal
	// Source names where the pack came from in its record and receipts.
	Source string
}

// PublishPack publishes a complete manifest whose chunks are all on disk
// (received through PutChunk or already held), atomically: the pack
// becomes visible in one ledger transaction or not at all. It checks the
// manifest as Admit does (except the seal's MAC, which Admit verified),
// and that every chunk file is present with the right size (a
// *MissingChunksError lists those that are not). A pack that already
// exists for the same identity, tenant and tokens is kept and its ID
// returned with isNew false; opts.Seal is spent all the same (rule T2).
func (s *Store) PublishPack(ctx context.Context, m *pack.Manifest, opts PublishOptions) (id pack.Digest, isNew bool, err error) {
	if err := s.checkWritable(); err != nil {
		return pack.Digest{}, false, err
	}
	if opts.Source == "" {
		opts.Source = SourceLocal
	}
	mb, err := m.Marshal()
	if err != nil {
		return pack.Digest{}, false, err
	}
	pid := pack.PackID(mb)
	if m.Identity.Format != pack.FormatVersion {
		return pid, false, s.refuse(pid, opts.Source, &pack.IdentityError{Diffs: []pack.FieldDiff{{Field: "format",
			Want: fmt.Sprint(pack.FormatVersion), Got: fmt.Sprint(m.Identity.Format)}}})
	}
	if m.BlockTokens != s.block {
		return pid, false, s.refuse(pid, opts.Source, fmt.Errorf("%w: the pack has %d-token blocks, the store %d", errBlockSize, m.BlockTokens, s.block))
	}
	if err := m.CheckRoot(); err != nil {
		return pid, false, s.refuse(pid, opts.Source, err)
	}
	defer s.lease(m.ChunkIDs()...)()
	missing, err := s.MissingChunks(m.Chunks)
	if err != nil {
		return pid, false, err
	}
	if len(missing) > 0 {
		return pid, false, &MissingChunksError{Pack: pid, Chunks: missing}
	}
	return s.commitManifest(ctx, m, m.BlockKeys(), opts.Source, opts.Seal, map[string]bool{}, false)
}

// ImportOptions qualify Import.
type ImportOptions struct {
	// Key is the secret the file's seal must verify under (nil: the
	// store's own key).
	Key []byte
	// Expect, when non-nil, is the identity the importer wants.
	Expect *pack.Identity
	// Source names the file in receipts ("import:PATH").
	Source string
}

// ImportResult says what an import did.
type ImportResult struct {
	Pack          pack.Digest
	New           bool
	ChunksWritten int
	BytesWritten  int64
}

// Import reads one export file from r and publishes its pack. Everything
// is re-verified: the file's structure and trailer digest, the seal, the
// replay ledger, the identity, every chunk against its ID and the Merkle
// root. Whatever does not verify is refused with a receipt (a
// *RefusalError wrapping pack.ErrRefused); chunks written before a
// refusal stay invisible orphans for gc. No partial pack is ever visible.
func (s *Store) Import(ctx context.Context, r io.Reader, opts ImportOptions) (ImportResult, error) {
	var res ImportResult
	if err := s.checkWritable(); err != nil {
		return res, err
	}
	if opts.Source == "" {
		opts.Source = "import"
	}
	fr, err := pack.NewFileReader(r)
	if err != nil {
		return res, s.refuseIO(pack.Digest{}, opts.Source, err)
	}
	res.Pack = fr.PackID()
	m, _, err := s.Admit(ctx, Offer{Manifest: fr.ManifestBytes(), Seal: fr.Seal()}, AdmitOptions{Key: opts.Key, Expect: opts.Expect, Source: opts.Source})
	if err != nil {
		return res, err
	}
	var held []pack.Digest
	defer func() { s.releaseAll(held) }()
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		ref, data, err := fr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, s.refuseIO(res.Pack, opts.Source, err)
		}
		s.mu.Lock()
		s.leases[ref.ID]++
		s.mu.Unlock()
		held = append(held, ref.ID)
		wrote, err := s.putChunk(ref.ID, data)
		if err != nil {
			return res, err
		}
		if wrote {
			res.ChunksWritten++
			res.BytesWritten += int64(len(data))
		}
	}
	if err := fr.Finish(); err != nil {
		return res, s.refuseIO(res.Pack, opts.Source, err)
	}
	seal := fr.Seal()
	res.Pack, res.New, err = s.PublishPack(ctx, m, PublishOptions{Seal: &seal, Source: opts.Source})
	if !res.New {
		res.ChunksWritten, res.BytesWritten = 0, 0
	}
	return res, err
}

// refuseIO refuses on a format fault but passes plain I/O errors through.
func (s *Store) refuseIO(id pack.Digest, source string, err error) error {
	if errors.Is(err, pack.ErrCorrupt) || errors.Is(err, pack.ErrRefused) {
		return s.refuse(id, source, err)
	}
	return err
}

func (s *Store) releaseAll(ids []pack.Digest) {
	s.mu.Lock()
	for _, id := range ids {
		if s.leases[id]--; s.leases[id] <= 0 {
			delete(s.leases, id)
		}
	}
	s.mu.Unlock()
}

// Export writes pack id to w as one sealed, self-describing export file
// (docs/kvpack.md, "Export file"). The manifest and every chunk are
// verified as they are read; a fault quarantines the pack and returns a
// *RefusalError, and w then holds an unfinished file that import refuses.
// Each export advances the store's seal generation.
func (s *Store) Export(ctx context.Context, id pack.Digest, w io.Writer) error {
	if err := s.checkWritable(); err != nil {
		return err
	}
	if s.key == nil {
		return fmt.Errorf("store %s has no seal key", s.dir)
	}
	rec, err := s.packRecord(id)
	if err != nil {
		return err
	}
	if rec.quarantined() {
		return fmt.Errorf("pack %s: %w", id.Short(), ErrQuarantined)
	}
	defer s.lease(id)()
	m, mb, err := s.readManifest(id)
	if err != nil {
		return s.fail(id, "export", err, nil)
	}
	ids := m.ChunkIDs()
	defer s.lease(ids...)()
	var gen uint64
	err = s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		g, _ := getU64(meta.Get(metaSealGen))
		gen = g + 1
		return meta.Put(metaSealGen, u64bytes(gen))
	})
	if err != nil {
		return err
	}
	var nonce [pack.NonceSize]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return err
	}
	seal, err := pack.NewSeal(s.key, id, s.node, gen, nonce)
	if err != nil {
		return err
	}
	fw, err := pack.NewFileWriter(w, mb, seal)
	if err != nil {
		return err
	}
	block := map[pack.Digest]int{}
	for i := len(m.Chunks) - 1; i >= 0; i-- {
		block[m.Chunks[i].ID] = i
	}
	var buf []byte
	for {
		ref, ok := fw.Next()
		if !ok {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := s.readChunk(ref, buf)
		if err != nil {
			return s.fail(id, "export", &ChunkFault{Block: block[ref.ID], Chunk: ref.ID, Err: err}, &ref.ID)
		}
		buf = data[:cap(data)]
		if err := fw.WriteChunk(data); err != nil {
			return err
		}
	}
	if err := fw.Close(); err != nil {
		return err
	}
	s.touch(id)
	return nil
}

// tempName reports whether a file name is one of the store's temporary
// files.
func tempName(name string) bool {
	return len(name) > len(tempPrefix) && name[:len(tempPrefix)] == tempPrefix
}
