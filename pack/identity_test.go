package pack_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
)

// mutateField returns id with field i (canonical order) changed.
func mutateField(id pack.Identity, i int) pack.Identity {
	switch i {
	case 0:
		id.Format++
	case 1:
		id.Model[0] ^= 1
	case 2:
		id.Arch += "x"
	case 3:
		id.Tokenizer[31] ^= 0x80
	case 4:
		id.Template[5] ^= 2
	case 5:
		id.Quant = "Q8_0"
	case 6:
		id.KV = "f32;block=4;layout=lkv1"
	case 7:
		id.Engine = "muser-test/2"
	}
	return id
}

func TestIdentityRoundTrip(t *testing.T) {
	for _, seed := range []string{"a", "b", "ünïcode"} {
		t.Run(seed, func(t *testing.T) {
			id := packtest.Identity(seed)
			b, err := id.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			got, err := pack.DecodeIdentity(b)
			if err != nil {
				t.Fatal(err)
			}
			if got != id {
				t.Fatalf("got %+v, want %+v", got, id)
			}
			// Every strict prefix is a truncation.
			for n := 0; n < len(b); n++ {
				_, err := pack.DecodeIdentity(b[:n])
				if !errors.Is(err, pack.ErrCorrupt) {
					t.Fatalf("prefix %d: got %v, want ErrCorrupt", n, err)
				}
			}
			if _, err := pack.DecodeIdentity(append(b, 0)); !errors.Is(err, pack.ErrCorrupt) {
				t.Fatalf("trailing byte: got %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestIdentityDiffNamesEachField(t *testing.T) {
	base := packtest.Identity("base")
	for i, field := range pack.IdentityFields {
		t.Run(field, func(t *testing.T) {
			other := mutateField(base, i)
			diffs := base.Diff(other)
			if len(diffs) != 1 {
				t.Fatalf("got %d diffs %v, want 1", len(diffs), diffs)
			}
			d := diffs[0]
			if d.Field != field {
				t.Errorf("got field %q, want %q", d.Field, field)
			}
			if d.Want == d.Got || d.Want == "" || d.Got == "" {
				t.Errorf("got want=%q got=%q, want two different values", d.Want, d.Got)
			}
			if base.Key() == other.Key() {
				t.Errorf("identity key did not change with field %s", field)
			}
			err := base.Check(other)
			var ie *pack.IdentityError
			if !errors.As(err, &ie) || !errors.Is(err, pack.ErrRefused) {
				t.Fatalf("Check: got %v, want *IdentityError wrapping ErrRefused", err)
			}
			if !strings.Contains(err.Error(), field+": want ") {
				t.Errorf("Check message %q does not name field %s", err, field)
			}
		})
	}
	if d := base.Diff(base); d != nil {
		t.Errorf("Diff of equal identities: got %v, want nil", d)
	}
	all := base
	for i := range pack.IdentityFields {
		all = mutateField(all, i)
	}
	if got := len(base.Diff(all)); got != 8 {
		t.Errorf("all fields changed: got %d diffs, want 8", got)
	}
}

func TestIdentityValidate(t *testing.T) {
	ok := packtest.Identity("v")
	tests := []struct {
		name   string
		mutate func(*pack.Identity)
		field  string
	}{
		{"zero format", func(id *pack.Identity) { id.Format = 0 }, "format"},
		{"zero model", func(id *pack.Identity) { id.Model = pack.Digest{} }, "model"},
		{"zero tokenizer", func(id *pack.Identity) { id.Tokenizer = pack.Digest{} }, "tokenizer"},
		{"zero template", func(id *pack.Identity) { id.Template = pack.Digest{} }, "template"},
		{"empty arch", func(id *pack.Identity) { id.Arch = "" }, "arch"},
		{"long quant", func(id *pack.Identity) { id.Quant = strings.Repeat("q", pack.MaxIdentityString+1) }, "quant"},
		{"bad utf8 kv", func(id *pack.Identity) { id.KV = "\xff" }, "kv"},
		{"control engine", func(id *pack.Identity) { id.Engine = "a\nb" }, "engine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := ok
			tt.mutate(&id)
			err := id.Validate()
			if !errors.Is(err, pack.ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("got %v, want ErrInvalid naming %s", err, tt.field)
			}
			if _, err := id.MarshalBinary(); err == nil {
				t.Fatalf("MarshalBinary accepted an invalid identity")
			}
		})
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid identity: %v", err)
	}
	long := ok
	long.Arch = strings.Repeat("a", pack.MaxIdentityString)
	long.Quant, long.KV, long.Engine = long.Arch, long.Arch, long.Arch
	b, err := long.MarshalBinary()
	if err != nil || len(b) != pack.MaxIdentityBytes {
		t.Fatalf("largest identity: got %d bytes, err %v; want %d", len(b), err, pack.MaxIdentityBytes)
	}
}
