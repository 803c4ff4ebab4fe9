package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/serve/adminapi"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

// muser runs one command line against home and returns its exit status,
// stdout and stderr.
func muser(t *testing.T, home string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	full := append([]string{}, args...)
	if home != "" {
		full = append(full, "--home", home)
	}
	code := run(context.Background(), full, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

var testID = packtest.Identity("cli")

// fillStore publishes n packs into a new store and returns its home and
// the pack IDs.
func fillStore(t *testing.T, n int) (string, []pack.Digest) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	s, err := store.Open(home, store.Options{BlockTokens: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []pack.Digest
	for i := 0; i < n; i++ {
		ids = append(ids, storetest.Publish(t, s, testID, []byte("t"), packtest.Tokens(uint64(i), 8+4*(i%3), 1000), 64).Pack)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return home, ids
}

func TestPackLsInspect(t *testing.T) {
	home, ids := fillStore(t, 17) // 17 > 16 hex digits: some first digit repeats
	code, out, _ := muser(t, home, "pack", "ls")
	if code != 0 {
		t.Fatalf("pack ls: exit %d", code)
	}
	for _, id := range ids {
		if !strings.Contains(out, id.Short()) {
			t.Fatalf("pack ls does not list %s:\n%s", id.Short(), out)
		}
	}
	if !strings.Contains(out, "17 packs") {
		t.Errorf("pack ls summary missing:\n%s", out)
	}
	code, out, _ = muser(t, home, "pack", "ls", "--json")
	var infos []store.PackInfo
	if code != 0 || json.Unmarshal([]byte(out), &infos) != nil || len(infos) != 17 {
		t.Fatalf("pack ls --json: exit %d, %d packs", code, len(infos))
	}
	code, out, _ = muser(t, home, "pack", "inspect", ids[3].String()[:10])
	if code != 0 || !strings.Contains(out, ids[3].String()) || !strings.Contains(out, `engine     "muser-test/1"`) {
		t.Fatalf("pack inspect: exit %d:\n%s", code, out)
	}
	code, out, _ = muser(t, home, "pack", "inspect", "--json", ids[3].String())
	var ij adminapi.Inspect
	if code != 0 || json.Unmarshal([]byte(out), &ij) != nil || ij.Manifest == nil || len(ij.Manifest.Tokens) != ij.Pack.Tokens {
		t.Fatalf("pack inspect --json: exit %d:\n%s", code, out)
	}
	// A one-digit prefix shared by two packs is ambiguous: exit 3.
	seen := map[byte]bool{}
	var dup string
	for _, id := range ids {
		c := id.String()[0]
		if seen[c] {
			dup = string(c)
		}
		seen[c] = true
	}
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"pack", "inspect", dup}, exitNotFound},
		{[]string{"pack", "inspect", strings.Repeat("f", 64)}, exitNotFound},
		{[]string{"pack", "inspect", "xyz"}, exitUsage},
		{[]string{"pack", "inspect"}, exitUsage},
		{[]string{"pack", "pin", ids[0].String()}, exitOK},
		{[]string{"pack", "unpin", ids[0].String()}, exitOK},
		{[]string{"pack", "pin", ids[1].String()}, exitOK},
		{[]string{"receipts", "show", "abc"}, exitNotFound},
		{[]string{"receipts", "show", "zz"}, exitUsage},
		{[]string{"receipts", "show", ""}, exitUsage},
		{[]string{"receipts", "show", strings.Repeat("a", 33)}, exitUsage},
	} {
		if code, _, errs := muser(t, home, tt.args...); code != tt.code {
			t.Errorf("%v: exit %d, want %d (%s)", tt.args, code, tt.code, errs)
		}
	}
	_, out, _ = muser(t, home, "pack", "ls")
	if !regexp.MustCompile(ids[1].Short() + `.*pinned`).MatchString(out) {
		t.Errorf("pinned pack not shown pinned:\n%s", out)
	}
	if code, _, errs := muser(t, filepath.Join(t.TempDir(), "none"), "pack", "ls"); code != exitNotFound || !strings.Contains(errs, "no store") {
		t.Errorf("ls of a missing store: exit %d, %q", code, errs)
	}
	storetest.CheckDir(t, home, store.Options{})
}

// TestPackVerifyCLI: a clean store verifies OK and its ledger file is not
// modified; after flipping one byte of a chunk file or of a manifest,
// verify names the pack, says "N errors found" and exits 1.
func TestPackVerifyCLI(t *testing.T) {
	home, ids := fillStore(t, 3)
	ledger := filepath.Join(home, "ledger.db")
	before, _ := os.ReadFile(ledger)
	code, out, _ := muser(t, home, "pack", "verify")
	if code != 0 || out != "OK\n" {
		t.Fatalf("clean verify: exit %d, %q", code, out)
	}
	after, _ := os.ReadFile(ledger)
	if !bytes.Equal(before, after) {
		t.Fatal("verify of a clean store modified the ledger")
	}
	if code, out, _ := muser(t, home, "pack", "verify", "--read-data-subset", "2/3", ids[0].String()[:8]); code != 0 || out != "OK\n" {
		t.Fatalf("subset verify of one pack: exit %d, %q", code, out)
	}
	s, err := store.Open(home, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Manifest(ids[1])
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	h := m.Chunks[1].ID.String()
	chunk := filepath.Join(home, "chunks", h[:2], h)
	h = ids[1].String()
	manifest := filepath.Join(home, "packs", h[:2], h)
	errLine := regexp.MustCompile(`(?m)^[1-9][0-9]* errors found\n\z`)
	for _, target := range []string{chunk, manifest} {
		size := int(fileSize(t, target))
		for _, at := range []int{0, size / 2, size - 1} {
			work := filepath.Join(t.TempDir(), "home")
			copyDir(t, home, work)
			rel, _ := filepath.Rel(home, target)
			flipByte(t, filepath.Join(work, rel), at)
			code, out, _ := muser(t, work, "pack", "verify")
			if code != exitFailure || !errLine.MatchString(out) || !strings.Contains(out, "pack "+ids[1].Short()) {
				t.Fatalf("%s byte %d flipped: exit %d:\n%s", filepath.Base(target), at, code, out)
			}
			if strings.Contains(out, ids[0].Short()) || strings.Contains(out, ids[2].Short()) {
				t.Fatalf("healthy packs named:\n%s", out)
			}
			// The pack is quarantined with a receipt; verify --json agrees.
			code, out, _ = muser(t, work, "pack", "verify", "--json")
			var vj adminapi.VerifyReport
			if code != exitFailure || json.Unmarshal([]byte(out), &vj) != nil || vj.Errors == 0 || vj.Findings[0].Pack == nil || *vj.Findings[0].Pack != ids[1] {
				t.Fatalf("verify --json: exit %d:\n%s", code, out)
			}
			code, out, _ = muser(t, work, "receipts", "ls")
			if code != 0 || !strings.Contains(out, ids[1].Short()) || !strings.Contains(out, "verify") {
				t.Fatalf("receipts ls: exit %d:\n%s", code, out)
			}
		}
	}
}

func TestReceiptsCLI(t *testing.T) {
	home, ids := fillStore(t, 1)
	s, err := store.Open(home, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	other := testID
	other.Quant = "Q8_0"
	_, err = s.RestorePack(context.Background(), store.RestoreRequest{Pack: ids[0], Identity: other}, func(int, []byte) error { return nil })
	s.Close()
	if err == nil {
		t.Fatal("restore under another quant was not refused")
	}
	code, out, _ := muser(t, home, "receipts", "ls", "--reason", "identity-mismatch", "--since", "1h")
	if code != 0 || !strings.Contains(out, "identity-mismatch") {
		t.Fatalf("receipts ls: exit %d:\n%s", code, out)
	}
	rid := strings.Fields(strings.Split(out, "\n")[1])[0]
	code, out, _ = muser(t, home, "receipts", "show", rid[:5])
	if code != 0 || !strings.Contains(out, `field     quant: want "Q8_0", got "F32"`) {
		t.Fatalf("receipts show: exit %d:\n%s", code, out)
	}
	code, out, _ = muser(t, home, "receipts", "ls", "--reason", "chunk-digest")
	if code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("filter by another reason: exit %d:\n%s", code, out)
	}
	if code, _, errs := muser(t, home, "receipts", "ls", "--reason", "bogus"); code != exitUsage || !strings.Contains(errs, "identity-mismatch") {
		t.Fatalf("bad reason: exit %d, %q", code, errs)
	}
}

func TestPackExportImportCLI(t *testing.T) {
	home, ids := fillStore(t, 2)
	file := filepath.Join(t.TempDir(), "p.kvpack")
	if code, _, errs := muser(t, home, "pack", "export", ids[0].String()[:12], "-o", file); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	key := filepath.Join(home, "seal.key")
	code, out, errs := muser(t, dst, "pack", "import", file, "--key", key)
	if code != 0 || !strings.Contains(out, "imported pack "+ids[0].String()) {
		t.Fatalf("import: exit %d: %s %s", code, out, errs)
	}
	if code, out, _ := muser(t, dst, "pack", "verify"); code != 0 || out != "OK\n" {
		t.Fatalf("verify after import: exit %d %q", code, out)
	}
	// The same file again is a replay: refused, exit 4, with a receipt.
	code, _, errs = muser(t, dst, "pack", "import", file, "--key", key)
	if code != exitRefused || !strings.Contains(errs, "replay") {
		t.Fatalf("re-import: exit %d, %q", code, errs)
	}
	// Without the key: the seal does not verify.
	other := filepath.Join(t.TempDir(), "other")
	if code, _, errs := muser(t, other, "pack", "import", file); code != exitRefused || !strings.Contains(errs, "bad-seal") {
		t.Fatalf("import without the key: exit %d, %q", code, errs)
	}
	// A damaged file is refused.
	b, _ := os.ReadFile(file)
	b[len(b)/2] ^= 1
	bad := filepath.Join(t.TempDir(), "bad.kvpack")
	os.WriteFile(bad, b, 0o600)
	if code, _, errs := muser(t, other, "pack", "import", bad, "--key", key); code != exitRefused {
		t.Fatalf("damaged import: exit %d, %q", code, errs)
	}
	if code, out, _ := muser(t, other, "receipts", "ls"); code != 0 || strings.Count(out, "\n") != 3 {
		t.Fatalf("receipts after two refusals: exit %d:\n%s", code, out)
	}
	if code, _, _ := muser(t, home, "pack", "export", ids[0].String()); code != exitUsage {
		t.Fatalf("export without -o: exit %d", code)
	}
	if code, _, _ := muser(t, home, "pack", "import", filepath.Join(t.TempDir(), "missing")); code != exitNotFound {
		t.Fatalf("import of a missing file: exit %d", code)
	}
}

func TestPackGCAndRmCLI(t *testing.T) {
	home, ids := fillStore(t, 4)
	if code, _, _ := muser(t, home, "pack", "pin", ids[2].String()); code != 0 {
		t.Fatal("pin failed")
	}
	code, out, _ := muser(t, home, "pack", "gc", "--max-bytes", "0", "--dry-run")
	if code != 0 || strings.Count(out, "would remove pack") != 3 {
		t.Fatalf("gc --dry-run: exit %d:\n%s", code, out)
	}
	_, ls, _ := muser(t, home, "pack", "ls")
	if !strings.Contains(ls, "4 packs") {
		t.Fatalf("dry run removed packs:\n%s", ls)
	}
	code, out, _ = muser(t, home, "pack", "gc", "--max-bytes", "1KiB")
	if code != 0 || !strings.Contains(out, "removed pack") || strings.Contains(out, ids[2].Short()) {
		t.Fatalf("gc: exit %d:\n%s", code, out)
	}
	if code, _, errs := muser(t, home, "pack", "gc", "--max-bytes", "12 parsecs"); code != exitUsage {
		t.Fatalf("bad --max-bytes: exit %d %q", code, errs)
	}
	code, out, _ = muser(t, home, "pack", "rm", ids[2].String())
	if code != 0 || !strings.Contains(out, "removed pack "+ids[2].Short()) {
		t.Fatalf("rm: exit %d:\n%s", code, out)
	}
	if code, _, _ := muser(t, home, "pack", "rm", ids[2].String()); code != exitNotFound {
		t.Fatalf("rm of a removed pack: exit %d", code)
	}
	storetest.CheckDir(t, home, store.Options{})
}

func TestLockedCLI(t *testing.T) {
	home, _ := fillStore(t, 1)
	s, err := store.Open(home, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, args := range [][]string{{"pack", "ls"}, {"pack", "verify"}, {"receipts", "ls"}} {
		if code, _, errs := muser(t, home, args...); code != exitLocked || !strings.Contains(errs, "in use") {
			t.Errorf("%v while the store is open: exit %d, %q", args, code, errs)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"123", 123, true}, {"1KiB", 1024, true}, {"1kb", 1000, true},
		{"1.5 GiB", 3 << 29, true}, {"2M", 2e6, true}, {"", 0, false}, {"GiB", 0, false},
		{"1 parsec", 0, false}, {"99999999999999TiB", 0, false}, {"1.2.3", 0, false},
		{"1.5", 0, false}, {"1.5B", 0, false}, {"0.5KiB", 512, true}, {"1.0001KB", 1000, true}, {"2.0", 2, true},
	} {
		got, err := parseBytes(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseBytes(%q): got %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// Text printed to a terminal from receipts and errors keeps its
// characters but cannot carry control sequences, and a cut never splits
// a character.
func TestPrintable(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"chunk 1a2b refused", "chunk 1a2b refused"},
		{"détail, 数据, 👩‍💻", "détail, 数据, 👩‍💻"},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"a\nb\rc\td", `a\nb\rc\td`},
		{"bad \xff byte", `bad \xff byte`},
		{"abc\u202edcba", `abc\u202edcba`},
		{"\u0085\u009b", `\u0085\u009b`},
	} {
		if got := printable(tt.in); got != tt.want {
			t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := strings.Repeat("é", 120)
	if got := shorten(long, 100); got != strings.Repeat("é", 97)+"..." {
		t.Errorf("shorten cut %q", got)
	}
	if got := shorten("short", 100); got != "short" {
		t.Errorf("shorten changed a short string: %q", got)
	}
}

// receipts ls and show print a detail recorded from a peer without its
// control sequences, and cut a long one on a character boundary.
func TestReceiptsPrintDetailSafely(t *testing.T) {
	home, _ := fillStore(t, 1)
	s, err := store.Open(home, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	detail := "peer said: \x1b]0;pwned\x07\x1b[2J" + strings.Repeat("数", 120)
	r, err := s.AddReceipt(store.Receipt{Reason: pack.ReasonTruncated, Source: "peer:beta", Detail: detail})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"receipts", "ls"}, {"receipts", "show", r.ID}} {
		code, out, errs := muser(t, home, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		if strings.ContainsAny(out, "\x1b\x07") || !utf8.ValidString(out) {
			t.Errorf("%v printed control bytes or a cut character:\n%q", args, out)
		}
		if !strings.Contains(out, `\x1b]0;pwned\a`) {
			t.Errorf("%v does not show the escaped detail:\n%s", args, out)
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	f.Add("1.5 GiB")
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := parseBytes(s); err == nil && n < 0 {
			t.Fatalf("parseBytes(%q) = %d", s, n)
		}
	})
}

func fileSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func flipByte(t *testing.T, path string, at int) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPackGCTierUsage: the tier's flags are checked before the tier is
// dialled: a grace below the upload rules' bound and a bad budget are
// usage errors. (--max-bytes 0 is a budget of zero, as for the local
// store: TestPackPinTier runs it.)
func TestPackGCTierUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-bytes", "-1"}, "--max-bytes"},
		{[]string{"--tier-grace", "1h"}, "--tier-grace 1h0m0s: at least"},
	} {
		args := append([]string{"pack", "gc", "--tier", "s3://bucket/prefix"}, tc.args...)
		code, _, errOut := muser(t, t.TempDir(), args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: got exit %d, %q; want %d saying %q", tc.args, code, errOut, exitUsage, tc.want)
		}
	}
}

// TestPackBadIDArgs: every pack command that takes pack IDs (or unique
// prefixes of them) refuses one that is not 1 to 64 hex digits as a bad
// argument, exit status 2 naming it, before it opens the store, the tier
// or a peer connection, and changes nothing: a valid ID given beside it
// is not acted on.
func TestPackBadIDArgs(t *testing.T) {
	home, ids := fillStore(t, 1)
	good := ids[0].String()
	for _, args := range [][]string{
		{"cluster", "init", "--name", "alpha"},
		{"node", "enroll", "bob", "-o", filepath.Join(t.TempDir(), "bob.bundle")},
		{"node", "add", "bob", "127.0.0.1:9"},
	} {
		if code, _, errOut := muser(t, home, args...); code != exitOK {
			t.Fatalf("%v: exit %d, %s", args, code, errOut)
		}
	}
	// The tier is never reached: its endpoint does not answer.
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
	t.Setenv("AWS_ACCESS_KEY_ID", "muser-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "muser-test-secret")
	keyFile := filepath.Join(t.TempDir(), "tier.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("6b", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tierFlags := []string{"--tier", "s3://bucket/fleet", "--tier-key", keyFile}
	out := filepath.Join(t.TempDir(), "pack.muex")
	commands := []struct {
		name string
		args func(id string) []string
	}{
		{"pack inspect", func(id string) []string { return []string{"pack", "inspect", id} }},
		{"pack inspect", func(id string) []string { return []string{"pack", "inspect", "--json", id} }},
		{"pack verify", func(id string) []string { return []string{"pack", "verify", id} }},
		{"pack verify", func(id string) []string { return []string{"pack", "verify", good, id} }},
		{"pack rm", func(id string) []string { return []string{"pack", "rm", id} }},
		{"pack rm", func(id string) []string { return []string{"pack", "rm", good, id} }},
		{"pack pin", func(id string) []string { return []string{"pack", "pin", id} }},
		{"pack unpin", func(id string) []string { return []string{"pack", "unpin", id} }},
		{"pack pin", func(id string) []string { return append([]string{"pack", "pin", id}, tierFlags...) }},
		{"pack unpin", func(id string) []string { return append([]string{"pack", "unpin", id}, tierFlags...) }},
		{"pack export", func(id string) []string { return []string{"pack", "export", "-o", out, id} }},
		{"pack push", func(id string) []string { return []string{"pack", "push", "bob", id} }},
		{"pack push", func(id string) []string { return []string{"pack", "push", "bob", good, id} }},
		{"pack pull", func(id string) []string { return []string{"pack", "pull", "bob", id} }},
		{"pack pull", func(id string) []string { return []string{"pack", "pull", "bob", "abcd", id} }},
	}
	for _, id := range []string{"zz", "", "e2e3db91e36dZ", strings.Repeat("a", 65), good + "0"} {
		for _, c := range commands {
			args := c.args(id)
			code, stdout, errOut := muser(t, home, args...)
			want := "muser " + c.name + `: pack ID "` + id + `"`
			if code != exitUsage || !strings.Contains(errOut, want) {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and %q", args, code, stdout, errOut, exitUsage, want)
			}
		}
	}
	if _, err := os.Lstat(out); err == nil {
		t.Errorf("pack export of a bad ID wrote %s", out)
	}
	s, err := store.Open(home, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	info, err := s.Pack(ids[0])
	if err != nil || info.Pinned || info.Quarantined {
		t.Errorf("pack %s after the refused commands: %+v, %v; want it in the store as it was", ids[0].Short(), info, err)
	}
}
