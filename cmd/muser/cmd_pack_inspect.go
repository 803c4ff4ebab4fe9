package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

func newPackInspectCommand() *command {
	var asJSON bool
	cmd := &command{
		name:    "pack inspect",
		args:    "ID",
		summary: "show a pack's manifest, identity and chunks",
		help: `Prints everything a pack's manifest says: its identity field by field,
tenant tag, Merkle root, producer and generation, creation time, and the
chunk of each block. The manifest is verified (its bytes hash to the pack
ID and its root checks) but chunks are not read; use 'muser pack verify'.
--json also prints the token list. ID may be a unique hex prefix.`,
		home:  true,
		flags: func(fs *pflag.FlagSet) { fs.BoolVar(&asJSON, "json", false, "print JSON") },
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) != 1 {
			return usagef(cmd, "takes exactly one pack ID, got %d arguments", len(args))
		}
		if err := checkPackRefs(cmd, args); err != nil {
			return err
		}
		a, done, err := openAdmin(ctx, env, true)
		if err != nil {
			return err
		}
		defer done()
		in, err := a.Inspect(ctx, args[0])
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(env.stdout, in)
		}
		info, m, id := in.Pack, in.Manifest, in.Pack.ID
		w := env.stdout
		yes := func(b bool) string {
			if b {
				return "yes"
			}
			return "no"
		}
		fmt.Fprintf(w, "pack         %s\n", id)
		fmt.Fprintf(w, "tokens       %d (%d blocks of %d)\n", len(m.Tokens), len(m.Chunks), m.BlockTokens)
		fmt.Fprintf(w, "bytes        %d (%s)\n", m.Bytes(), formatBytes(int64(m.Bytes())))
		fmt.Fprintf(w, "manifest     %d bytes\n", info.ManifestBytes)
		fmt.Fprintf(w, "merkle root  %s\n", m.Root)
		fmt.Fprintf(w, "tenant       %s\n", m.Tenant)
		fmt.Fprintf(w, "producer     %s (generation %d)\n", m.Producer, m.Generation)
		fmt.Fprintf(w, "created      %s\n", m.Created.UTC().Format(time.RFC3339Nano))
		fmt.Fprintf(w, "last use     %s\n", formatTime(info.LastUse))
		fmt.Fprintf(w, "source       %s\n", info.Source)
		fmt.Fprintf(w, "pinned       %s\n", yes(info.Pinned))
		fmt.Fprintf(w, "quarantined  %s\n", yes(info.Quarantined))
		idn := m.Identity
		fmt.Fprintf(w, "identity     %s\n", idn.Key)
		fmt.Fprintf(w, "  format     %d\n", idn.Format)
		fmt.Fprintf(w, "  model      %s\n", idn.Model)
		fmt.Fprintf(w, "  arch       %s\n", strconv.Quote(idn.Arch))
		fmt.Fprintf(w, "  tokenizer  %s\n", idn.Tokenizer)
		fmt.Fprintf(w, "  template   %s\n", idn.Template)
		fmt.Fprintf(w, "  quant      %s\n", strconv.Quote(idn.Quant))
		fmt.Fprintf(w, "  kv         %s\n", strconv.Quote(idn.KV))
		fmt.Fprintf(w, "  engine     %s\n", strconv.Quote(idn.Engine))
		fmt.Fprintf(w, "chunks       %d\n", len(m.Chunks))
		t := &table{}
		for i, c := range m.Chunks {
			t.add("  "+strconv.Itoa(i), c.ID.String(), strconv.FormatUint(uint64(c.Size), 10))
		}
		t.write(w)
		return nil
	}
	return cmd
}
