package store

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/muserhq/muser/pack"
)

func samplePackRecord() *packRecord {
	return &packRecord{flags: flagPinned, blocks: 3, bytes: 3 * 768 << 10, manifestSize: 900,
		identityKey: pack.Digest{1}, tenant: pack.Digest{2}, endKey: pack.Digest{3},
		created: 1700000000000000000, lastUse: 1700000001000000000, source: "import:x.kvpack"}
}

func sampleChain() []chainEntry {
	return []chainEntry{{key: pack.Digest{1}, chunk: pack.Digest{2}, size: 10}, {key: pack.Digest{3}, chunk: pack.Digest{2}, size: 10}}
}

func TestLedgerRecordsRoundTrip(t *testing.T) {
	r := samplePackRecord()
	got, err := decodePackRecord(r.encode())
	if err != nil || *got != *r {
		t.Fatalf("pack record: got %+v, %v", got, err)
	}
	c := sampleChain()
	gc, err := decodeChain(encodeChain(c))
	if err != nil || len(gc) != 2 || gc[1] != c[1] {
		t.Fatalf("chain: got %+v, %v", gc, err)
	}
	cr := chunkRecord{size: 5, refs: 9}
	gcr, err := decodeChunkRecord(cr.encode())
	if err != nil || gcr != cr {
		t.Fatalf("chunk record: got %+v, %v", gcr, err)
	}
	decoders := []struct {
		enc []byte
		dec func([]byte) error
	}{
		{r.encode(), func(b []byte) error { _, err := decodePackRecord(b); return err }},
		{encodeChain(c), func(b []byte) error { _, err := decodeChain(b); return err }},
		{cr.encode(), func(b []byte) error { _, err := decodeChunkRecord(b); return err }},
	}
	for i, d := range decoders {
		for n := 0; n < len(d.enc); n++ {
			if err := d.dec(d.enc[:n]); !errors.Is(err, pack.ErrCorrupt) {
				t.Fatalf("decoder %d, prefix %d: got %v, want ErrCorrupt", i, n, err)
			}
		}
		if err := d.dec(append(bytes.Clone(d.enc), 0)); !errors.Is(err, pack.ErrCorrupt) {
			t.Fatalf("decoder %d, trailing byte: got %v", i, err)
		}
	}
}

func FuzzDecodePackRecord(f *testing.F) {
	f.Add(samplePackRecord().encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodePackRecord(b)
		if err != nil {
			if !errors.Is(err, pack.ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if !bytes.Equal(r.encode(), b) {
			t.Fatal("not canonical")
		}
	})
}

func FuzzDecodeChain(f *testing.F) {
	f.Add(encodeChain(sampleChain()))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeChain(b)
		if err != nil {
			if !errors.Is(err, pack.ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if !bytes.Equal(encodeChain(c), b) {
			t.Fatal("not canonical")
		}
	})
}

func FuzzDecodeChunkRecord(f *testing.F) {
	f.Add(chunkRecord{size: 5, refs: 9}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeChunkRecord(b)
		if err != nil {
			if !errors.Is(err, pack.ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if !bytes.Equal(r.encode(), b) {
			t.Fatal("not canonical")
		}
	})
}

func FuzzDecodeReceipt(f *testing.F) {
	var id [8]byte
	k := receiptKey(time.Unix(1700000000, 0), id)
	f.Add(k, []byte(`{"id":"0000000000000000","reason":"replay","source":"peer:a","detail":"x"}`))
	f.Fuzz(func(t *testing.T, k, v []byte) {
		r, err := decodeReceipt(k, v)
		if err != nil {
			var le *LedgerError
			if !errors.As(err, &le) {
				t.Fatalf("error is not a LedgerError: %v", err)
			}
			return
		}
		_ = r.Detail
	})
}
