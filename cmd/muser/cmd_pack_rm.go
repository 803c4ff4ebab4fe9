package main

import (
	"context"
	"fmt"

	"github.com/muserhq/muser/serve/adminapi"
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
	name, summary, help := "pack pin", "protect a pack from gc", "Marks the pack pinned: gc never evicts it ('muser pack rm' still deletes it)."
	if !pin {
		name, summary, help = "pack unpin", "let gc evict a pack again", "Clears the pack's pin."
	}
	cmd := &command{name: name, args: "ID", summary: summary, help: help, home: true}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) != 1 {
			return usagef(cmd, "takes exactly one pack ID, got %d arguments", len(args))
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
