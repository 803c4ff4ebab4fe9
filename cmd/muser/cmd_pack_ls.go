package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
)

func newPackLsCommand() *command {
	var (
		asJSON bool
		tf     tierFlags
	)
	cmd := &command{
		name:    "pack ls",
		summary: "list the packs in the store",
		help: `Lists every pack, oldest first: its ID (a unique prefix of which any
pack command accepts), the tokens it covers, the bytes of its chunks, its
chunk count, the short key of its identity, when it was created and last
used, and its state (pinned, quarantined). --json prints the full records.
The store is opened read-only; while a muser server owns it, the server
answers (docs/serve.md, "Admin endpoint").

With --tier s3://BUCKET/PREFIX it lists the fleet tier's manifests instead:
ID, tokens, bytes, chunks, identity, the producer, when it was uploaded,
its last use (the later of its upload and the last install of it by any
node: fleet gc evicts the least recently used first) and its state
(pinned, or why it does not verify).

` + tierHelp,
		home: true,
		flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&asJSON, "json", false, "print JSON")
			tf.AddFlags(fs, "list")
		},
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) > 0 {
			return usagef(cmd, "takes no arguments, got %q", args[0])
		}
		if tf.url != "" {
			return runTierLs(ctx, env, &tf, asJSON)
		}
		a, done, err := openAdmin(ctx, env, true)
		if err != nil {
			return err
		}
		defer done()
		packs, err := a.Packs(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(env.stdout, packs)
		}
		t := &table{}
		t.add("ID", "TOKENS", "BYTES", "CHUNKS", "IDENTITY", "CREATED", "LAST USE", "STATE")
		var total int64
		for _, p := range packs {
			state := "-"
			switch {
			case p.Quarantined:
				state = "quarantined"
			case p.Pinned:
				state = "pinned"
			}
			t.add(p.ID.Short(), strconv.Itoa(p.Tokens), formatBytes(p.Bytes), strconv.Itoa(p.Blocks),
				p.IdentityKey.Short(), formatTime(p.Created), formatTime(p.LastUse), state)
			total += p.Bytes
		}
		t.write(env.stdout)
		st, err := a.Stats(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "%d packs, %d distinct chunks: %s on disk, %s without dedup\n",
			st.Packs, st.Chunks, formatBytes(st.Bytes), formatBytes(total+st.ManifestBytes))
		return nil
	}
	return cmd
}
