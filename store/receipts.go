package store

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/muserhq/muser/pack"
	bolt "go.etcd.io/bbolt"
)

// Sources a receipt can name besides "peer:NAME" and "import:PATH".
const (
	// SourceLocal is the store's own engine and operators.
	SourceLocal = "local"
	// SourceVerify is a verify run.
	SourceVerify = "verify"
)

// maxReceiptBytes bounds one receipt record in the ledger.
const maxReceiptBytes = 64 << 10

// Receipt records one refusal: why muser would not use a pack, with the
// detail an operator needs. Receipts live in the ledger, newest last, with
// bounded retention (Options.ReceiptCount, Options.ReceiptAge).
type Receipt struct {
	// ID is 16 hex digits, unique within the store.
	ID string `json:"id"`
	// Time is when the refusal happened.
	Time time.Time `json:"time"`
	// Reason is the refusal's code.
	Reason pack.Reason `json:"reason"`
	// Pack is the refused pack's ID, zero when it is unknown (a file too
	// damaged to name one).
	Pack pack.Digest `json:"pack,omitzero"`
	// Source says where the pack came from: "local", "verify",
	// "peer:NAME" or "import:PATH".
	Source string `json:"source"`
	// Detail is the refusal in words.
	Detail string `json:"detail"`
	// Fields lists the differing identity fields (identity-mismatch).
	Fields []pack.FieldDiff `json:"fields,omitempty"`
	// Block and Chunk name the chunk at fault, when one is.
	Block *int        `json:"block,omitempty"`
	Chunk pack.Digest `json:"chunk,omitzero"`
	// Expected and Actual are the digests that disagreed (chunk-digest,
	// merkle-root, manifest-digest).
	Expected pack.Digest `json:"expected,omitzero"`
	Actual   pack.Digest `json:"actual,omitzero"`
}

// ReasonOf classifies an error from the store or from package pack into
// the reason code a receipt records for it: pack.ReasonOf extended with
// the store's own faults (a missing chunk file, a chunk file of the wrong
// size, divergent KV, a block size, replay, a stale generation, another
// tenant).
func ReasonOf(err error) pack.Reason { return reasonOf(err) }

func reasonOf(err error) pack.Reason {
	switch {
	case errors.Is(err, errMissing):
		return pack.ReasonMissingChunk
	case errors.Is(err, errSize):
		return pack.ReasonTruncated
	case errors.Is(err, errDivergent):
		return pack.ReasonDivergent
	case errors.Is(err, errBlockSize):
		return pack.ReasonBlockSize
	case errors.Is(err, errReplay):
		return pack.ReasonReplay
	case errors.Is(err, errStale):
		return pack.ReasonStaleGeneration
	case errors.Is(err, errTenant):
		return pack.ReasonUnauthorized
	}
	return pack.ReasonOf(err)
}

// newReceipt describes err as a receipt for pack id from source.
func (s *Store) newReceipt(id pack.Digest, source string, err error) Receipt {
	r := Receipt{Time: s.now().UTC(), Reason: reasonOf(err), Pack: id, Source: source, Detail: err.Error()}
	var (
		ie *pack.IdentityError
		de *pack.DigestError
		cf *ChunkFault
	)
	if errors.As(err, &ie) {
		r.Fields = ie.Diffs
	}
	if errors.As(err, &de) {
		r.Expected, r.Actual = de.Expected, de.Actual
	}
	if errors.As(err, &cf) {
		b := cf.Block
		r.Block, r.Chunk = &b, cf.Chunk
	}
	return r
}

// refuse records a receipt for the refusal of pack id from source because
// of err, and returns the *RefusalError to hand back. On a read-only store
// the receipt is not recorded and its ID stays empty.
func (s *Store) refuse(id pack.Digest, source string, err error) error {
	return s.Refuse(id, source, "", err)
}

// Refuse is refuse for a refusal decided outside the store (the fleet
// tier refusing an object): reason, when not empty, overrides the reason
// the receipt would take from err.
func (s *Store) Refuse(id pack.Digest, source string, reason pack.Reason, err error) error {
	r := s.newReceipt(id, source, err)
	if reason != "" {
		r.Reason = reason
	}
	if s.checkWritable() == nil {
		_ = s.db.Update(func(tx *bolt.Tx) error {
			var werr error
			r, werr = s.putReceipt(tx, r)
			return werr
		})
	}
	return &RefusalError{Receipt: r, Err: err}
}

// putReceipt stores r in tx, assigning its ID, and applies retention.
func (s *Store) putReceipt(tx *bolt.Tx, r Receipt) (Receipt, error) {
	var rid [8]byte
	if _, err := rand.Read(rid[:]); err != nil {
		return r, err
	}
	r.ID = hex.EncodeToString(rid[:])
	r, v, err := encodeReceipt(r)
	if err != nil {
		return r, err
	}
	b := tx.Bucket(bucketReceipts)
	if err := b.Put(receiptKey(r.Time, rid), v); err != nil {
		return r, err
	}
	// Retention: drop receipts older than ReceiptAge, then the oldest
	// beyond ReceiptCount.
	cutoff := receiptKey(s.now().Add(-s.opts.ReceiptAge), [8]byte{})
	c := b.Cursor()
	for k, _ := c.First(); k != nil && bytes.Compare(k, cutoff) < 0; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return r, err
		}
	}
	n := 0
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	for ; n > s.opts.ReceiptCount; n-- {
		if k, _ := c.First(); k == nil {
			break
		}
		if err := c.Delete(); err != nil {
			return r, err
		}
	}
	return r, nil
}

// cutMark ends a receipt's detail or source that was cut to fit the
// record's bound.
const cutMark = " [cut]"

// encodeReceipt returns r's ledger record, cutting its detail, then its
// source (halving each in turn, between UTF-8 characters, marked with
// cutMark) until the record fits maxReceiptBytes, the bound decodeReceipt
// enforces: a refusal's text can be longer (a handshake refusal quotes the
// certificate a stranger presented), and a record the reader refuses
// would fail every listing of receipts. It returns the receipt as stored.
func encodeReceipt(r Receipt) (Receipt, []byte, error) {
	detail, source := r.Detail, r.Source
	nd, ns := len(detail), len(source)
	for {
		v, err := json.Marshal(r)
		if err != nil || len(v) <= maxReceiptBytes {
			return r, v, err
		}
		switch {
		case nd > 0:
			nd /= 2
			r.Detail = cutUTF8(detail, nd) + cutMark
		case ns > 0:
			ns /= 2
			r.Source = cutUTF8(source, ns) + cutMark
		default:
			// Only the fields (identity values, bounded by the
			// format) are left: too large for a record.
			return r, nil, fmt.Errorf("receipt %s: %d bytes without detail or source, over the record limit of %d", r.ID, len(v), maxReceiptBytes)
		}
	}
}

// cutUTF8 returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// AddReceipt records a receipt made elsewhere (replication refusing an
// offer, the server refusing a request). Its ID and, if zero, its time are
// assigned here; the stored receipt is returned.
func (s *Store) AddReceipt(r Receipt) (Receipt, error) {
	if err := s.checkWritable(); err != nil {
		return r, err
	}
	if _, err := pack.ParseReason(string(r.Reason)); err != nil {
		return r, err
	}
	if r.Time.IsZero() {
		r.Time = s.now().UTC()
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		r, err = s.putReceipt(tx, r)
		return err
	})
	return r, err
}

// ReceiptFilter selects receipts for Receipts. Zero fields select all.
type ReceiptFilter struct {
	Reason pack.Reason
	Since  time.Time
	Pack   pack.Digest
}

// Receipts returns the receipts that match f, oldest first.
func (s *Store) Receipts(f ReceiptFilter) ([]Receipt, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	var out []Receipt
	err := guard(s.ledgerPath(), func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketReceipts).Cursor()
			var k, v []byte
			if f.Since.IsZero() {
				k, v = c.First()
			} else {
				k, v = c.Seek(receiptKey(f.Since, [8]byte{}))
			}
			for ; k != nil; k, v = c.Next() {
				r, err := decodeReceipt(k, v)
				if err != nil {
					return err
				}
				if f.Reason != "" && r.Reason != f.Reason || !f.Pack.IsZero() && r.Pack != f.Pack {
					continue
				}
				out = append(out, r)
			}
			return nil
		})
	})
	return out, err
}

// LatestReceipts returns the newest n receipts, newest first, and how many
// the store keeps in all; it decodes only the n it returns.
func (s *Store) LatestReceipts(n int) ([]Receipt, int, error) {
	if err := s.checkOpen(); err != nil {
		return nil, 0, err
	}
	var (
		out   []Receipt
		total int
	)
	err := guard(s.ledgerPath(), func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketReceipts)
			total = b.Stats().KeyN
			c := b.Cursor()
			for k, v := c.Last(); k != nil && len(out) < n; k, v = c.Prev() {
				r, err := decodeReceipt(k, v)
				if err != nil {
					return err
				}
				out = append(out, r)
			}
			return nil
		})
	})
	return out, total, err
}

// Receipt returns the receipt whose ID starts with the hex prefix; an
// ambiguous prefix wraps ErrAmbiguousID, none ErrNotFound.
func (s *Store) Receipt(prefix string) (Receipt, error) {
	prefix = strings.ToLower(prefix)
	if prefix == "" {
		return Receipt{}, fmt.Errorf("%w: empty receipt ID", pack.ErrInvalid)
	}
	all, err := s.Receipts(ReceiptFilter{})
	if err != nil {
		return Receipt{}, err
	}
	var hits []Receipt
	for _, r := range all {
		if strings.HasPrefix(r.ID, prefix) {
			hits = append(hits, r)
		}
	}
	switch len(hits) {
	case 0:
		return Receipt{}, fmt.Errorf("receipt %q: %w", prefix, ErrNotFound)
	case 1:
		return hits[0], nil
	}
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	sort.Strings(ids)
	return Receipt{}, fmt.Errorf("receipt %q matches %s: %w", prefix, strings.Join(ids, ", "), ErrAmbiguousID)
}

func decodeReceipt(k, v []byte) (Receipt, error) {
	var r Receipt
	if len(k) != 16 {
		return r, &LedgerError{Bucket: "receipts", Key: hex.EncodeToString(k), Err: fmt.Errorf("key of %d bytes, want 16", len(k))}
	}
	if len(v) > maxReceiptBytes {
		return r, &LedgerError{Bucket: "receipts", Key: hex.EncodeToString(k), Err: fmt.Errorf("record of %d bytes exceeds %d", len(v), maxReceiptBytes)}
	}
	if err := json.Unmarshal(v, &r); err != nil {
		return r, &LedgerError{Bucket: "receipts", Key: hex.EncodeToString(k), Err: err}
	}
	if r.ID != hex.EncodeToString(k[8:]) {
		return r, &LedgerError{Bucket: "receipts", Key: hex.EncodeToString(k), Err: fmt.Errorf("record ID %q does not match its key", r.ID)}
	}
	return r, nil
}
