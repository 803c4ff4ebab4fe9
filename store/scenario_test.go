package store_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata/scenarios")

// TestScenarios runs the data-driven scenarios in testdata/scenarios (the
// idea of pebble's datadriven tests): each block is a command, a line
// "----" and its expected output; blocks are separated by blank lines.
// Packs are named P1, P2, ... in order of first appearance. With -update
// the expected outputs are rewritten.
//
// Commands: publish id=S salt=S tokens=SPEC size=N; match and restore
// id= salt= tokens=; pin, unpin, rm P...; gc max=N; verify; ls; stats;
// corrupt P chunk=I. A token SPEC is seed:count terms joined by "+".
func TestScenarios(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	if len(files) == 0 {
		t.Fatal("no scenarios")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScenario(t, f) })
	}
}

type scenario struct {
	t     *testing.T
	s     *store.Store
	names map[pack.Digest]string
	ids   map[string]pack.Digest
}

func runScenario(t *testing.T, path string) {
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	sc := &scenario{t: t, names: map[pack.Digest]string{}, ids: map[string]pack.Digest{},
		s: storetest.Open(t, "", store.Options{BlockTokens: 4, Node: "scenario", Now: clock.Now, NoSync: true, OrphanGrace: -1})}
	var out strings.Builder
	blocks := strings.Split(strings.TrimSpace(string(src)), "\n\n")
	for _, b := range blocks {
		cmd, want, _ := strings.Cut(b, "\n----")
		want = strings.TrimPrefix(want, "\n")
		var lines []string
		for _, l := range strings.Split(cmd, "\n") {
			if !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		got := sc.run(strings.Join(lines, " "))
		fmt.Fprintf(&out, "%s\n----\n%s\n\n", cmd, got)
		if !*update && strings.TrimSpace(got) != strings.TrimSpace(want) {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", path, cmd, got, want)
		}
	}
	if *update {
		if err := os.WriteFile(path, []byte(strings.TrimSpace(out.String())+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (sc *scenario) name(id pack.Digest) string {
	if n, ok := sc.names[id]; ok {
		return n
	}
	n := "P" + strconv.Itoa(len(sc.names)+1)
	sc.names[id], sc.ids[n] = n, id
	return n
}

func (sc *scenario) pack(n string) pack.Digest {
	id, ok := sc.ids[n]
	if !ok {
		sc.t.Fatalf("unknown pack %s", n)
	}
	return id
}

func tokenSpec(t *testing.T, spec string) []int32 {
	var out []int32
	for _, term := range strings.Split(spec, "+") {
		seed, n, ok := strings.Cut(term, ":")
		count, err := strconv.Atoi(n)
		if !ok || err != nil {
			t.Fatalf("bad token spec %q", spec)
		}
		h := fnv.New64a()
		h.Write([]byte(seed))
		out = append(out, packtest.Tokens(h.Sum64(), count, 1000)...)
	}
	return out
}

func (sc *scenario) run(line string) string {
	t, ctx := sc.t, context.Background()
	f := strings.Fields(line)
	args := map[string]string{}
	var pos []string
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	id := packtest.Identity(args["id"])
	salt := []byte(args["salt"])
	toks := func() []int32 { return tokenSpec(t, args["tokens"]) }
	switch f[0] {
	case "publish":
		size, _ := strconv.Atoi(args["size"])
		res, err := sc.s.PublishPrefix(ctx, id, salt, toks(), storetest.KV(id, salt, toks(), 4, size))
		if err != nil {
			return "error: " + err.Error()
		}
		if !res.New {
			return fmt.Sprintf("%s refreshed", sc.name(res.Pack))
		}
		return fmt.Sprintf("%s new, %d chunks written", sc.name(res.Pack), res.ChunksWritten)
	case "match":
		m, err := sc.s.Match(id, salt, toks())
		if err != nil {
			return "error: " + err.Error()
		}
		if m.Tokens == 0 {
			return "miss"
		}
		return fmt.Sprintf("%d tokens from %s", m.Tokens, sc.name(m.Pack))
	case "restore":
		n, _, err := storetest.Restore(t, sc.s, id, salt, toks())
		var re *store.RefusalError
		if errors.As(err, &re) {
			return fmt.Sprintf("refused: %s", re.Receipt.Reason)
		}
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("%d tokens", n)
	case "pin", "unpin", "rm":
		var ids []pack.Digest
		for _, p := range pos {
			ids = append(ids, sc.pack(p))
		}
		var err error
		switch f[0] {
		case "pin":
			err = sc.s.Pin(ids[0])
		case "unpin":
			err = sc.s.Unpin(ids[0])
		default:
			var res store.RemoveResult
			res, err = sc.s.Remove(ids...)
			if err == nil {
				return fmt.Sprintf("removed %d packs, %d chunk files", len(res.Packs), res.Chunks)
			}
		}
		if err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	case "gc":
		max, _ := strconv.ParseInt(args["max"], 10, 64)
		rep, err := sc.s.GC(ctx, store.GCOptions{MaxBytes: max})
		if err != nil {
			return "error: " + err.Error()
		}
		var names []string
		for _, p := range rep.Removed.Packs {
			names = append(names, sc.name(p.ID))
		}
		return fmt.Sprintf("removed [%s], %d chunk files; %d -> %d bytes; over budget %v",
			strings.Join(names, " "), rep.Removed.Chunks, rep.Before, rep.After, rep.OverBudget)
	case "verify":
		rep, err := sc.s.Verify(ctx, store.VerifyOptions{Quarantine: true})
		if err != nil {
			return "error: " + err.Error()
		}
		if len(rep.Findings) == 0 {
			return "OK"
		}
		var lines []string
		for _, f := range rep.Findings {
			var pe *store.PackError
			if errors.As(f, &pe) {
				r := string(store.ReasonOf(pe.Err))
				if errors.Is(f, store.ErrQuarantined) {
					r = "quarantined"
				}
				lines = append(lines, fmt.Sprintf("%s: %s", sc.name(pe.Pack), r))
			} else {
				lines = append(lines, "ledger finding")
			}
		}
		sort.Strings(lines)
		return strings.Join(lines, "\n")
	case "ls":
		ps, err := sc.s.Packs()
		if err != nil {
			return "error: " + err.Error()
		}
		var lines []string
		for _, p := range ps {
			state := ""
			if p.Pinned {
				state += " pinned"
			}
			if p.Quarantined {
				state += " quarantined"
			}
			lines = append(lines, fmt.Sprintf("%s %d tokens %d bytes%s", sc.name(p.ID), p.Tokens, p.Bytes, state))
		}
		sort.Strings(lines)
		return strings.Join(lines, "\n")
	case "stats":
		st, err := sc.s.Stats()
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("packs=%d chunks=%d chunk-bytes=%d index-nodes=%d", st.Packs, st.Chunks, st.ChunkBytes, st.IndexNodes)
	case "corrupt":
		m, err := sc.s.Manifest(sc.pack(pos[0]))
		if err != nil {
			return "error: " + err.Error()
		}
		i, _ := strconv.Atoi(args["chunk"])
		flip(t, chunkFile(sc.s.Dir(), m.Chunks[i].ID), 0)
		return "ok"
	}
	t.Fatalf("unknown command %q", f[0])
	return ""
}
