package main

import (
	"context"
	"fmt"
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
		s, err := openStore(env, false, false)
		if err != nil {
			return err
		}
		defer s.Close()
		ids, err := resolvePacks(s, args)
		if err != nil {
			return err
		}
		res, err := s.Remove(ids...)
		if err != nil {
			return err
		}
		for _, p := range res.Packs {
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
		s, err := openStore(env, false, false)
		if err != nil {
			return err
		}
		defer s.Close()
		id, err := s.ResolvePack(args[0])
		if err != nil {
			return err
		}
		op, verb := s.Pin, "pinned"
		if !pin {
			op, verb = s.Unpin, "unpinned"
		}
		if err := op(id); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "%s pack %s\n", verb, id.Short())
		return nil
	}
	return cmd
}
