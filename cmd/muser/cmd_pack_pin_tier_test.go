package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/tier"
	"github.com/muserhq/muser/store/tier/tiertest"
)

// TestPackPinTier: `pack pin --tier` and `pack unpin --tier` against a
// real S3 server: the pin shows in `pack ls --tier`, `pack gc --tier
// --max-bytes 0` keeps the pinned pack and evicts the other, and the
// errors have the documented exit codes.
func TestPackPinTier(t *testing.T) {
	srv := tiertest.Start(t)
	bucket := srv.Bucket()
	srv.Env(t)
	url := "s3://" + bucket + "/fleet"
	key := []byte(strings.Repeat("k", 32))
	keyFile := filepath.Join(t.TempDir(), "tier.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Two packs published on some node and uploaded.
	s := storetest.Open(t, "", store.Options{BlockTokens: 4, Node: "up"})
	tr, err := tier.Open(tier.ConfigFromEnv(tier.Location{Bucket: bucket, Prefix: "fleet"}, key, "up"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []pack.Digest
	for i := range 2 {
		id := storetest.Publish(t, s, testID, []byte("t"), packtest.Tokens(uint64(40+i), 8, 1000), 64).Pack
		if _, err := tr.Upload(context.Background(), s, id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	home := t.TempDir()
	tierArgs := func(args ...string) []string { return append(args, "--tier", url, "--tier-key", keyFile) }
	listed := func() map[pack.Digest]tier.PackInfo {
		t.Helper()
		code, out, errOut := muser(t, home, tierArgs("pack", "ls", "--json")...)
		var ps []tier.PackInfo
		if code != 0 || json.Unmarshal([]byte(out), &ps) != nil {
			t.Fatalf("pack ls --tier --json: exit %d, %q %q", code, out, errOut)
		}
		m := map[pack.Digest]tier.PackInfo{}
		for _, p := range ps {
			m[p.Pack] = p
		}
		return m
	}

	code, out, errOut := muser(t, home, tierArgs("pack", "pin", ids[0].String()[:10])...)
	if code != 0 || !strings.Contains(out, "pinned pack "+ids[0].Short()) {
		t.Fatalf("pack pin --tier: exit %d, %q %q; want it pinned", code, out, errOut)
	}
	if ps := listed(); !ps[ids[0]].Pinned || ps[ids[1]].Pinned || ps[ids[0]].LastUse == "" {
		t.Fatalf("pack ls --tier after the pin: got %+v, want %s alone pinned, with a last use", ps, ids[0].Short())
	}
	if code, out, _ := muser(t, home, tierArgs("pack", "ls")...); code != 0 || !strings.Contains(out, "LAST USE") || !strings.Contains(out, "pinned") {
		t.Fatalf("pack ls --tier: exit %d, %q; want a LAST USE column and a pinned pack", code, out)
	}
	code, out, errOut = muser(t, home, tierArgs("pack", "gc", "--max-bytes", "0")...)
	if code != 0 || !strings.Contains(out, "evicted pack "+ids[1].Short()) || strings.Contains(out, ids[0].Short()) {
		t.Fatalf("pack gc --tier --max-bytes 0: exit %d, %q %q; want %s evicted, the pinned pack kept", code, out, errOut, ids[1].Short())
	}
	if ps := listed(); len(ps) != 1 || !ps[ids[0]].Pinned {
		t.Fatalf("pack ls --tier after gc: got %+v, want the pinned pack alone", ps)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown pack", tierArgs("pack", "pin", ids[1].String()), exitNotFound, "not found"},
		{"two IDs", tierArgs("pack", "pin", "ab", "cd"), exitUsage, "exactly one pack ID"},
		{"no key", []string{"pack", "unpin", "--tier", url, ids[0].String()}, exitUsage, "--tier-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := muser(t, home, tc.args...)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Errorf("got exit %d, %q %q; want %d saying %q", code, out, errOut, tc.code, tc.want)
			}
		})
	}

	code, out, errOut = muser(t, home, tierArgs("pack", "unpin", ids[0].String()[:10])...)
	if code != 0 || !strings.Contains(out, "unpinned pack "+ids[0].Short()) {
		t.Fatalf("pack unpin --tier: exit %d, %q %q", code, out, errOut)
	}
	code, out, errOut = muser(t, home, tierArgs("pack", "gc", "--max-bytes", "0")...)
	if code != 0 || !strings.Contains(out, "evicted pack "+ids[0].Short()) {
		t.Fatalf("pack gc --tier --max-bytes 0 after the unpin: exit %d, %q %q; want %s evicted", code, out, errOut, ids[0].Short())
	}
}
