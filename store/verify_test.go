package store_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

func TestVerifySubsetsCoverEverything(t *testing.T) {
	s := storetest.Open(t, "", store.Options{BlockTokens: 4, NoSync: true})
	id := packtest.Identity("v")
	for i := uint64(0); i < 6; i++ {
		storetest.Publish(t, s, id, salt, packtest.Tokens(60+i, 16, 500), 40)
	}
	st, _ := s.Stats()
	ctx := context.Background()
	total := 0
	for n := 1; n <= 3; n++ {
		rep, err := s.Verify(ctx, store.VerifyOptions{Subset: store.Subset{N: n, T: 3}})
		if err != nil || len(rep.Findings) != 0 {
			t.Fatalf("subset %d/3: %v %v", n, rep.Findings, err)
		}
		total += rep.ChunksRead
	}
	if total != st.Chunks {
		t.Fatalf("subsets 1/3..3/3 read %d chunks, the store has %d", total, st.Chunks)
	}
	rep, _ := s.Verify(ctx, store.VerifyOptions{NoData: true})
	if rep.ChunksRead != 0 || rep.Packs != 6 {
		t.Fatalf("NoData: read %d chunks of %d packs", rep.ChunksRead, rep.Packs)
	}
	for _, bad := range []string{"0/3", "4/3", "1", "a/b", "1/0"} {
		if _, err := store.ParseSubset(bad); !errors.Is(err, pack.ErrInvalid) {
			t.Errorf("ParseSubset(%q): got %v, want ErrInvalid", bad, err)
		}
	}
}

// TestVerifyQuarantine: verify with Quarantine set quarantines every pack
// that uses a bad chunk, records a receipt for each, and reports them on
// the next run until they are removed; packs that do not use it stay.
func TestVerifyQuarantine(t *testing.T) {
	s := storetest.Open(t, "", store.Options{BlockTokens: 4, NoSync: true})
	id := packtest.Identity("q")
	toks := packtest.Tokens(70, 16, 500)
	a := storetest.Publish(t, s, id, salt, toks[:8], 40).Pack
	b := storetest.Publish(t, s, id, salt, toks, 40).Pack // shares a's chunks
	c := storetest.Publish(t, s, id, salt, packtest.Tokens(71, 8, 500), 40).Pack
	m, _ := s.Manifest(a)
	flip(t, chunkFile(s.Dir(), m.Chunks[1].ID), 0)
	ctx := context.Background()
	rep, err := s.Verify(ctx, store.VerifyOptions{Quarantine: true})
	if err != nil {
		t.Fatal(err)
	}
	got := findingPacks(rep)
	if !got[a] || !got[b] || got[c] || len(rep.Quarantined) != 2 {
		t.Fatalf("findings %v, quarantined %d; want a and b, not c", rep.Findings, len(rep.Quarantined))
	}
	rs, _ := s.Receipts(store.ReceiptFilter{Reason: pack.ReasonChunkDigest})
	if len(rs) != 2 || rs[0].Source != store.SourceVerify || rs[0].Expected != m.Chunks[1].ID {
		t.Fatalf("receipts: %+v", rs)
	}
	// The bad chunk file moved to quarantine/.
	if _, err := os.Stat(chunkFile(s.Dir(), m.Chunks[1].ID)); !os.IsNotExist(err) {
		t.Fatalf("bad chunk still in place: %v", err)
	}
	rep, _ = s.Verify(ctx, store.VerifyOptions{})
	if got := findingPacks(rep); !got[a] || !got[b] || got[c] {
		t.Fatalf("second run: %v", rep.Findings)
	}
	for _, f := range rep.Findings {
		if !errors.Is(f, store.ErrQuarantined) {
			t.Fatalf("second run finding %v, want ErrQuarantined only", f)
		}
	}
	if _, err := s.RestorePack(ctx, store.RestoreRequest{Pack: a, Identity: id}, nil); !errors.Is(err, store.ErrQuarantined) {
		t.Fatalf("restore of a quarantined pack: got %v", err)
	}
	// gc drops quarantined packs; c stays.
	rep2, err := s.GC(ctx, store.GCOptions{MaxBytes: -1})
	if err != nil || len(rep2.Removed.Packs) != 2 {
		t.Fatalf("gc: %+v %v", rep2, err)
	}
	if n, _, err := storetest.Restore(t, s, id, salt, packtest.Tokens(71, 8, 500)); n != 8 || err != nil {
		t.Fatalf("c after gc: %d %v", n, err)
	}
}

func TestReceiptRetention(t *testing.T) {
	clock := &fakeClock{t: packtest.Manifest0Time()}
	s := storetest.Open(t, "", store.Options{ReceiptCount: 5, Now: clock.Now})
	for i := 0; i < 12; i++ {
		if _, err := s.AddReceipt(store.Receipt{Reason: pack.ReasonMalformed, Detail: "test", Source: "peer:x"}); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := s.Receipts(store.ReceiptFilter{})
	if err != nil || len(rs) != 5 {
		t.Fatalf("got %d receipts (%v), want the newest 5", len(rs), err)
	}
	for i := 1; i < len(rs); i++ {
		if !rs[i-1].Time.Before(rs[i].Time) {
			t.Fatal("receipts not oldest first")
		}
	}
	since, _ := s.Receipts(store.ReceiptFilter{Since: rs[3].Time})
	if len(since) != 2 {
		t.Fatalf("since: got %d, want 2", len(since))
	}
	if _, err := s.Receipt(rs[0].ID[:6]); err != nil {
		t.Fatalf("prefix lookup: %v", err)
	}
	if _, err := s.Receipt("zz"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown: got %v", err)
	}
	if _, err := s.AddReceipt(store.Receipt{Reason: "nonsense"}); !errors.Is(err, pack.ErrInvalid) {
		t.Fatalf("unknown reason: got %v", err)
	}
}

func TestLatestReceipts(t *testing.T) {
	clock := &fakeClock{t: packtest.Manifest0Time()}
	s := storetest.Open(t, "", store.Options{Now: clock.Now})
	for i := 0; i < 7; i++ {
		if _, err := s.AddReceipt(store.Receipt{Reason: pack.ReasonMalformed, Detail: fmt.Sprint(i), Source: "peer:x"}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.Receipts(store.ReceiptFilter{})
	if err != nil || len(all) != 7 {
		t.Fatalf("got %d receipts (%v), want 7", len(all), err)
	}
	for _, n := range []int{0, 1, 3, 7, 10} {
		got, total, err := s.LatestReceipts(n)
		if err != nil || total != 7 {
			t.Fatalf("LatestReceipts(%d): total %d, %v; want 7", n, total, err)
		}
		want := min(n, 7)
		if len(got) != want {
			t.Fatalf("LatestReceipts(%d): %d receipts, want %d", n, len(got), want)
		}
		for i, r := range got {
			if r.ID != all[len(all)-1-i].ID {
				t.Errorf("LatestReceipts(%d)[%d] = %s (%s), want %s: newest first", n, i, r.ID, r.Detail, all[len(all)-1-i].ID)
			}
		}
	}
}

func FuzzParseSubset(f *testing.F) {
	f.Add("2/3")
	f.Fuzz(func(t *testing.T, s string) {
		sub, err := store.ParseSubset(s)
		if err != nil {
			if !errors.Is(err, pack.ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if sub.N < 1 || sub.N > sub.T {
			t.Fatalf("accepted %q as %v", s, sub)
		}
	})
}

// TestVerifySubsetLargeT: docs/kvpack.md defines subset n/t for every t
// ParseSubset accepts: chunk c is in it when the first four bytes of its
// ID, as a big-endian u32, are n-1 modulo t. A t above 2^32-1 exceeds
// every such value, so subset n/t holds exactly the chunks whose value is
// n-1. The expected counts are computed here from that text.
func TestVerifySubsetLargeT(t *testing.T) {
	s := storetest.Open(t, "", store.Options{BlockTokens: 4, NoSync: true})
	id := packtest.Identity("big-t")
	var chunks []pack.Digest
	for i := uint64(0); i < 4; i++ {
		r := storetest.Publish(t, s, id, salt, packtest.Tokens(80+i, 16, 500), 40)
		m, err := s.Manifest(r.Pack)
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, m.ChunkIDs()...)
	}
	first := chunks[0]
	firstValue := uint64(binary.BigEndian.Uint32(first[:4]))
	for _, tc := range []struct {
		name, subset string
	}{
		{"t is 2^32", "1/4294967296"},
		{"t is 2^32+1", "1/4294967297"},
		{"t is 2^32+2, n is 2", "2/4294967298"},
		{"n names the first chunk's value", fmt.Sprintf("%d/4294967297", firstValue+1)},
		{"t is 2^32+7, n is past 2^32", "4294967300/4294967303"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := store.ParseSubset(tc.subset)
			if err != nil {
				t.Fatal(err)
			}
			want := map[pack.Digest]bool{}
			for _, c := range chunks {
				if uint64(binary.BigEndian.Uint32(c[:4]))%uint64(sub.T) == uint64(sub.N-1) {
					want[c] = true
				}
			}
			rep, err := s.Verify(context.Background(), store.VerifyOptions{Subset: sub})
			if err != nil || len(rep.Findings) != 0 {
				t.Fatalf("verify %s: %v %v", tc.subset, rep.Findings, err)
			}
			if rep.ChunksRead != len(want) {
				t.Fatalf("subset %s read %d chunks, want %d", tc.subset, rep.ChunksRead, len(want))
			}
		})
	}
}

// TestLongReceiptReadsBack: a receipt record is at most 64 KiB
// (docs/kvpack.md, "Limits"), which the ledger's reader enforces. A
// refusal whose text is longer (a handshake refusal quotes the common
// name of whatever certificate a stranger presents) must still be stored
// as a record the store reads back, its text cut, not one that makes
// every listing of receipts fail.
func TestLongReceiptReadsBack(t *testing.T) {
	for _, tt := range []struct {
		desc           string
		detail, source string
	}{
		{"long detail", strings.Repeat("x", 70<<10), "peer:x"},
		{"detail that JSON escapes", strings.Repeat("<\x01", 12<<10), "peer:x"},
		{"long source", "refused", "import:" + strings.Repeat("d", 70<<10)},
		{"both", strings.Repeat("é", 40<<10), "import:" + strings.Repeat("&", 20<<10)},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			s := storetest.Open(t, "", store.Options{})
			r, err := s.AddReceipt(store.Receipt{Reason: pack.ReasonUnauthorized, Detail: tt.detail, Source: tt.source})
			if err != nil {
				t.Fatal(err)
			}
			rs, err := s.Receipts(store.ReceiptFilter{})
			if err != nil || len(rs) != 1 || rs[0].ID != r.ID {
				t.Fatalf("Receipts after a long receipt = %d receipts, %v; want the one added", len(rs), err)
			}
			if _, _, err := s.LatestReceipts(1); err != nil {
				t.Fatalf("LatestReceipts: %v", err)
			}
			got := rs[0]
			if !utf8.ValidString(got.Detail) || !utf8.ValidString(got.Source) || got.Detail == "" || got.Source == "" {
				t.Fatalf("stored detail %q... and source %q..., want non-empty UTF-8", got.Detail[:min(20, len(got.Detail))], got.Source[:min(20, len(got.Source))])
			}
			if !strings.HasPrefix(tt.detail, strings.TrimSuffix(got.Detail, store.CutMark)) || !strings.HasPrefix(tt.source, strings.TrimSuffix(got.Source, store.CutMark)) {
				t.Fatalf("stored text is not a cut of the text given")
			}
		})
	}
}
