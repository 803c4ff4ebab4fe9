package main

import (
	"context"
	"fmt"
	"time"

	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/net/mtls"
)

func newNodeAddCommand() *command {
	cmd := &command{
		name:    "node add",
		args:    "NAME ADDR",
		summary: "admit the node NAME and record its replication address",
		help: `Adds NAME to this node's registry with ADDR (HOST:PORT of its replication
listener, 'muser serve --repl-addr'), or updates the address of a known
node. Only nodes in the registry may connect, and only they can be pushed
to or pulled from. A removed node is readmitted, but only with a
certificate issued after its removal (enroll it again).

A running server sees the change at its next handshake.`,
		home: true,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) != 2 {
			return usagef(cmd, "takes NAME and ADDR, got %d arguments", len(args))
		}
		if err := mtls.ValidateName(args[0]); err != nil {
			return usagef(cmd, "%v", err)
		}
		if err := cluster.ValidateAddr(args[1]); err != nil {
			return usagef(cmd, "%v", err)
		}
		h, err := cluster.Open(env.home)
		if err != nil {
			return err
		}
		before, _ := h.Peer(args[0])
		p, err := h.AddPeer(args[0], args[1], time.Now())
		if err != nil {
			return err
		}
		switch {
		case before.Name == "":
			fmt.Fprintf(env.stdout, "added %q at %s\n", p.Name, p.Addr)
		case !before.Active():
			fmt.Fprintf(env.stdout, "readmitted %q at %s (certificates issued before %s stay refused)\n",
				p.Name, p.Addr, p.RevokedBefore.Format(time.RFC3339))
		default:
			fmt.Fprintf(env.stdout, "updated %q: address %s\n", p.Name, p.Addr)
		}
		return nil
	}
	return cmd
}
