package adminapi

import (
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// Inspect is one pack in full: GET /admin/v1/packs/{id}, and what `muser
// pack inspect --json` prints.
type Inspect struct {
	Pack     store.PackInfo `json:"pack"`
	Manifest *Manifest      `json:"manifest"`
}

// Manifest is a verified manifest's content.
type Manifest struct {
	Identity    Identity        `json:"identity"`
	BlockTokens int             `json:"block_tokens"`
	Tenant      pack.Digest     `json:"tenant"`
	Root        pack.Digest     `json:"merkle_root"`
	Producer    string          `json:"producer"`
	Generation  uint64          `json:"generation"`
	Created     time.Time       `json:"created"`
	Chunks      []pack.ChunkRef `json:"chunks"`
	Tokens      []int32         `json:"tokens"`
}

// Bytes is the size of the manifest's chunks.
func (m *Manifest) Bytes() int64 {
	var n int64
	for _, c := range m.Chunks {
		n += int64(c.Size)
	}
	return n
}

// Identity is a pack identity, field by field, with its key.
type Identity struct {
	Key       pack.Digest `json:"key"`
	Format    uint32      `json:"format"`
	Model     pack.Digest `json:"model"`
	Arch      string      `json:"arch"`
	Tokenizer pack.Digest `json:"tokenizer"`
	Template  pack.Digest `json:"template"`
	Quant     string      `json:"quant"`
	KV        string      `json:"kv"`
	Engine    string      `json:"engine"`
}

// IdentityOf returns id in wire form.
func IdentityOf(id pack.Identity) Identity {
	return Identity{Key: id.Key(), Format: id.Format, Model: id.Model, Arch: id.Arch, Tokenizer: id.Tokenizer,
		Template: id.Template, Quant: id.Quant, KV: id.KV, Engine: id.Engine}
}

// Pack returns the identity the wire form describes (Key is recomputed
// from the fields, not trusted).
func (i Identity) Pack() pack.Identity {
	return pack.Identity{Format: i.Format, Model: i.Model, Arch: i.Arch, Tokenizer: i.Tokenizer,
		Template: i.Template, Quant: i.Quant, KV: i.KV, Engine: i.Engine}
}

// VerifyRequest is the body of POST /admin/v1/verify. Every field is
// optional.
type VerifyRequest struct {
	// Packs are pack IDs or unique hex prefixes; empty checks the whole
	// store.
	Packs []string `json:"packs,omitempty"`
	// ReadDataSubset is "n/t": read only the chunks of subset n of t.
	ReadDataSubset string `json:"read_data_subset,omitempty"`
}

// VerifyReport is what a verify found: POST /admin/v1/verify's answer,
// and what `muser pack verify --json` prints.
type VerifyReport struct {
	Packs       int           `json:"packs"`
	ChunksRead  int           `json:"chunks_read"`
	BytesRead   int64         `json:"bytes_read"`
	Findings    []Finding     `json:"findings"`
	Errors      int           `json:"errors"`
	Quarantined []pack.Digest `json:"quarantined"`
	Orphans     int           `json:"orphans"`
	OrphanBytes int64         `json:"orphan_bytes"`
}

// ProgressContentType is the Accept value that makes POST
// /admin/v1/verify stream VerifyEvent lines (NDJSON) instead of answering
// one report at the end.
const ProgressContentType = "application/x-ndjson"

// VerifyEvent is one line of a streamed verify: exactly one field is set.
type VerifyEvent struct {
	Progress *Progress     `json:"progress,omitempty"`
	Report   *VerifyReport `json:"report,omitempty"`
	Error    *Error        `json:"error,omitempty"`
}

// Progress counts the chunks a verify has read of those it reads.
type Progress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// Finding is one fault: the pack it concerns (absent for a ledger-wide
// one), a reason code and the fault in words.
type Finding struct {
	Pack   *pack.Digest `json:"pack,omitempty"`
	Reason string       `json:"reason"`
	Error  string       `json:"error"`
}

// GCRequest is the body of POST /admin/v1/gc.
type GCRequest struct {
	// MaxBytes is the byte budget; absent or null means none (only
	// quarantined packs and orphans go).
	MaxBytes *int64 `json:"max_bytes,omitempty"`
	// DryRun reports without deleting.
	DryRun bool `json:"dry_run,omitempty"`
	// Grace is how old an orphan file must be to go, as a Go duration
	// ("1h", "0s" for none); absent means the store's default.
	Grace string `json:"grace,omitempty"`
}

// GCReport is what gc removed, or would remove in a dry run.
type GCReport struct {
	DryRun   bool   `json:"dry_run"`
	MaxBytes *int64 `json:"max_bytes"`
	// Removed lists the packs removed (Quarantined says why: quarantined,
	// else least recently used).
	Removed       []store.PackInfo `json:"removed"`
	Chunks        int              `json:"chunks"`
	ChunkBytes    int64            `json:"chunk_bytes"`
	ManifestBytes int64            `json:"manifest_bytes"`
	Orphans       int              `json:"orphans"`
	OrphanBytes   int64            `json:"orphan_bytes"`
	Before        int64            `json:"before"`
	After         int64            `json:"after"`
	OverBudget    bool             `json:"over_budget"`
}

// RemoveRequest is the body of POST /admin/v1/remove.
type RemoveRequest struct {
	// Packs are pack IDs or unique hex prefixes; every one must resolve
	// or nothing is removed.
	Packs []string `json:"packs"`
}

// RemoveReport is what a removal deleted.
type RemoveReport struct {
	Removed       []store.PackInfo `json:"removed"`
	Chunks        int              `json:"chunks"`
	ChunkBytes    int64            `json:"chunk_bytes"`
	ManifestBytes int64            `json:"manifest_bytes"`
}

// PinReport answers a pin or unpin.
type PinReport struct {
	Pack   pack.Digest `json:"pack"`
	Pinned bool        `json:"pinned"`
}

// ReceiptQuery filters GET /admin/v1/receipts (query parameters reason
// and since, an RFC 3339 time).
type ReceiptQuery struct {
	Reason pack.Reason
	Since  time.Time
}

// ImportRequest describes an import besides the file's bytes.
type ImportRequest struct {
	// Source names the file in receipts ("import:PATH").
	Source string
	// Key is the secret the seal must verify under (nil: the store's).
	Key []byte
	// Expect, when set, is the identity the pack must have.
	Expect *pack.Identity
}

// ImportReport says what an import did.
type ImportReport struct {
	Pack          pack.Digest `json:"pack"`
	New           bool        `json:"new"`
	ChunksWritten int         `json:"chunks_written"`
	BytesWritten  int64       `json:"bytes_written"`
}
