package adminapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// API is what an operator can ask of a store. Local answers over an open
// store; Client over a running server's admin endpoint.
type API interface {
	Packs(ctx context.Context) ([]store.PackInfo, error)
	Stats(ctx context.Context) (store.Stats, error)
	Inspect(ctx context.Context, id string) (Inspect, error)
	Verify(ctx context.Context, req VerifyRequest, progress func(done, total int)) (VerifyReport, error)
	GC(ctx context.Context, req GCRequest) (GCReport, error)
	Remove(ctx context.Context, req RemoveRequest) (RemoveReport, error)
	Pin(ctx context.Context, id string, pin bool) (PinReport, error)
	Receipts(ctx context.Context, q ReceiptQuery) ([]store.Receipt, error)
	Receipt(ctx context.Context, id string) (store.Receipt, error)
	Import(ctx context.Context, r io.Reader, req ImportRequest) (ImportReport, error)
	Export(ctx context.Context, id string, w io.Writer) error
}

// Local is the API over an open store.
type Local struct {
	Store *store.Store
}

var _ API = Local{}

// Packs lists every pack, oldest first (never nil).
func (l Local) Packs(ctx context.Context) ([]store.PackInfo, error) {
	ps, err := l.Store.Packs()
	if ps == nil {
		ps = []store.PackInfo{}
	}
	return ps, err
}

// Stats returns the store's totals.
func (l Local) Stats(ctx context.Context) (store.Stats, error) { return l.Store.Stats() }

// Inspect resolves id and returns the pack's record and verified
// manifest.
func (l Local) Inspect(ctx context.Context, id string) (Inspect, error) {
	d, err := l.Store.ResolvePack(id)
	if err != nil {
		return Inspect{}, err
	}
	info, err := l.Store.Pack(d)
	if err != nil {
		return Inspect{}, err
	}
	m, err := l.Store.Manifest(d)
	if err != nil {
		return Inspect{}, err
	}
	return Inspect{Pack: info, Manifest: &Manifest{
		Identity: IdentityOf(m.Identity), BlockTokens: m.BlockTokens, Tenant: m.Tenant, Root: m.Root,
		Producer: m.Producer, Generation: m.Generation, Created: m.Created, Chunks: m.Chunks, Tokens: m.Tokens,
	}}, nil
}

// Verify checks the named packs (or the whole store), quarantining every
// pack with a finding.
func (l Local) Verify(ctx context.Context, req VerifyRequest, progress func(done, total int)) (VerifyReport, error) {
	opts := store.VerifyOptions{Quarantine: true, Progress: progress}
	if req.ReadDataSubset != "" {
		sub, err := store.ParseSubset(req.ReadDataSubset)
		if err != nil {
			return VerifyReport{}, invalidf("read_data_subset", "%v", err)
		}
		opts.Subset = sub
	}
	ids, err := l.resolve(req.Packs)
	if err != nil {
		return VerifyReport{}, err
	}
	opts.Packs = ids
	rep, err := l.Store.Verify(ctx, opts)
	if err != nil {
		return VerifyReport{}, err
	}
	return VerifyReportOf(rep), nil
}

// VerifyReportOf returns rep in wire form.
func VerifyReportOf(rep store.VerifyReport) VerifyReport {
	out := VerifyReport{Packs: rep.Packs, ChunksRead: rep.ChunksRead, BytesRead: rep.BytesRead,
		Findings: []Finding{}, Errors: len(rep.Findings), Quarantined: rep.Quarantined,
		Orphans: rep.Orphans, OrphanBytes: rep.OrphanBytes}
	if out.Quarantined == nil {
		out.Quarantined = []pack.Digest{}
	}
	for _, f := range rep.Findings {
		fj := Finding{Error: f.Error(), Reason: string(store.ReasonOf(f))}
		if errors.Is(f, store.ErrQuarantined) {
			fj.Reason = "quarantined"
		}
		var pe *store.PackError
		if errors.As(f, &pe) {
			p := pe.Pack
			fj.Pack = &p
		}
		out.Findings = append(out.Findings, fj)
	}
	return out
}

// GC runs gc with req's options.
func (l Local) GC(ctx context.Context, req GCRequest) (GCReport, error) {
	opts := store.GCOptions{MaxBytes: -1, DryRun: req.DryRun}
	if req.MaxBytes != nil {
		if *req.MaxBytes < 0 {
			return GCReport{}, invalidf("max_bytes", "is %d; want 0 or more (or leave it out: no budget)", *req.MaxBytes)
		}
		opts.MaxBytes = *req.MaxBytes
	}
	if req.Grace != "" {
		g, err := time.ParseDuration(req.Grace)
		if err != nil || g < 0 {
			return GCReport{}, invalidf("grace", "%q: want a duration of 0s or more, such as \"1h\"", req.Grace)
		}
		opts.Grace = g
		if g == 0 {
			opts.Grace = -1
		}
	}
	rep, err := l.Store.GC(ctx, opts)
	if err != nil {
		return GCReport{}, err
	}
	out := GCReport{DryRun: req.DryRun, MaxBytes: req.MaxBytes, Removed: rep.Removed.Packs,
		Chunks: rep.Removed.Chunks, ChunkBytes: rep.Removed.ChunkBytes, ManifestBytes: rep.Removed.ManifestBytes,
		Orphans: rep.Orphans, OrphanBytes: rep.OrphanBytes, Before: rep.Before, After: rep.After, OverBudget: rep.OverBudget}
	if out.Removed == nil {
		out.Removed = []store.PackInfo{}
	}
	return out, nil
}

// Remove deletes the named packs; every ID must resolve or nothing goes.
func (l Local) Remove(ctx context.Context, req RemoveRequest) (RemoveReport, error) {
	if len(req.Packs) == 0 {
		return RemoveReport{}, invalidf("packs", "needs at least one pack ID")
	}
	ids, err := l.resolve(req.Packs)
	if err != nil {
		return RemoveReport{}, err
	}
	res, err := l.Store.Remove(ids...)
	if err != nil {
		return RemoveReport{}, err
	}
	out := RemoveReport{Removed: res.Packs, Chunks: res.Chunks, ChunkBytes: res.ChunkBytes, ManifestBytes: res.ManifestBytes}
	if out.Removed == nil {
		out.Removed = []store.PackInfo{}
	}
	return out, nil
}

// Pin pins (or with pin false, unpins) one pack.
func (l Local) Pin(ctx context.Context, id string, pin bool) (PinReport, error) {
	d, err := l.Store.ResolvePack(id)
	if err != nil {
		return PinReport{}, err
	}
	op := l.Store.Pin
	if !pin {
		op = l.Store.Unpin
	}
	if err := op(d); err != nil {
		return PinReport{}, err
	}
	return PinReport{Pack: d, Pinned: pin}, nil
}

// Receipts lists the receipts q selects, oldest first (never nil).
func (l Local) Receipts(ctx context.Context, q ReceiptQuery) ([]store.Receipt, error) {
	rs, err := l.Store.Receipts(store.ReceiptFilter{Reason: q.Reason, Since: q.Since})
	if rs == nil {
		rs = []store.Receipt{}
	}
	return rs, err
}

// Receipt returns the receipt whose ID starts with id.
func (l Local) Receipt(ctx context.Context, id string) (store.Receipt, error) {
	return l.Store.Receipt(id)
}

// Import reads one export file from r and publishes its pack.
func (l Local) Import(ctx context.Context, r io.Reader, req ImportRequest) (ImportReport, error) {
	res, err := l.Store.Import(ctx, r, store.ImportOptions{Key: req.Key, Expect: req.Expect, Source: req.Source})
	if err != nil {
		return ImportReport{}, err
	}
	return ImportReport{Pack: res.Pack, New: res.New, ChunksWritten: res.ChunksWritten, BytesWritten: res.BytesWritten}, nil
}

// resolve turns ID prefixes into pack IDs; the first unknown or ambiguous
// one is the error.
func (l Local) resolve(args []string) ([]pack.Digest, error) {
	ids := make([]pack.Digest, 0, len(args))
	for _, a := range args {
		id, err := l.Store.ResolvePack(a)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return ids, nil
}

// String names a pin report's action ("pinned pack X").
func (p PinReport) String() string {
	verb := "unpinned"
	if p.Pinned {
		verb = "pinned"
	}
	return fmt.Sprintf("%s pack %s", verb, p.Pack.Short())
}

// Export resolves id and writes the pack's export file to w (the store
// re-verifies every chunk as it reads it).
func (l Local) Export(ctx context.Context, id string, w io.Writer) error {
	d, err := l.Store.ResolvePack(id)
	if err != nil {
		return err
	}
	return l.Store.Export(ctx, d, w)
}
