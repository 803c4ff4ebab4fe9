package main

import (
	"context"
	"fmt"

	"github.com/muserhq/muser/serve/adminapi"
	"github.com/spf13/pflag"
)

func newPackRmCommand() *command {
	cmd := &command{
		name:    "pack rm",
		args:    "ID...",
		summary: "delete packs (pinned or not) and the chunks only they use",
		help: `Deletes the named packs: first from the ledger, then their manifests and
the chunk files no other pack references. Every ID must resolve (a unique
hex prefix) or nothing is deleted.`,
		home: true,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) == 0 {
			return usagef(cmd, "needs at least one pack ID")
		}
		if err := checkPackRefs(cmd, args); err != nil {
			return err
		}
		a, done, err := openAdmin(ctx, env, false)
		if err != nil {
			return err
		}
		defer done()
		res, err := a.Remove(ctx, adminapi.RemoveRequest{Packs: args})
		if err != nil {
			return err
		}
		for _, p := range res.Removed {
			fmt.Fprintf(env.stdout, "removed pack %s (%d tokens)\n", p.ID.Short(), p.Tokens)
		}
		fmt.Fprintf(env.stdout, "freed %s (%d chunk files)\n", formatBytes(res.ChunkBytes+res.ManifestBytes), res.Chunks)
		return nil
	}
	return cmd
}

func newPackPinCommand(pin bool) *command {
	var tf tierFlags
	name, summary, help := "pack pin", "protect a pack from gc", `Marks the pack pinned: gc never evicts it ('muser pack rm' still deletes
it). While a muser server owns the store, the server pins it (docs/serve.md,
"Admin endpoint").

With --tier s3://BUCKET/PREFIX it pins the pack in the fleet tier instead:
an empty object PREFIX/pins/ID, which 'muser pack gc --tier' on any node
honours (docs/tier.md). The pack's manifest must be in the tier and verify
under the tier's key. A tier pin and a node's local pin are independent:
each protects its own copy.`
	if !pin {
		name, summary, help = "pack unpin", "let gc evict a pack again", `Clears the pack's pin. While a muser server owns the store, the server
clears it.

With --tier s3://BUCKET/PREFIX it deletes the pack's pin object in the
fleet tier instead (also one whose manifest is gone).`
	}
	cmd := &command{name: name, args: "ID", summary: summary, help: help + "\n\n" + tierHelp, home: true,
		flags: func(fs *pflag.FlagSet) { tf.AddFlags(fs, name[len("pack "):]+" the pack in") }}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) != 1 {
			return usagef(cmd, "takes exactly one pack ID, got %d arguments", len(args))
		}
		if err := checkPackRefs(cmd, args); err != nil {
			return err
		}
		if tf.url != "" {
			return runTierPin(ctx, env, &tf, args[0], pin)
		}
		a, done, err := openAdmin(ctx, env, false)
		if err != nil {
			return err
		}
		defer done()
		rep, err := a.Pin(ctx, args[0], pin)
		if err != nil {
			return err
		}
		fmt.Fprintln(env.stdout, rep)
		return nil
	}
	return cmd
}
