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
		args:    "NAME [ADDR]",
		summary: "admit the node NAME and record its replication address",
		help: `Adds NAME to this node's registry with ADDR (HOST:PORT of its replication
listener, 'muser serve --repl-addr'), or updates the address of a known
node. Only nodes in the registry may connect, and only those with an
address can be pushed to or pulled from; without ADDR, NAME is admitted
(it may connect here) and its address, if any, is kept. A removed node is
readmitted, but only with a certificate issued after its removal (enroll
it again).

A running server sees the change at its next handshake.`,
		home: true,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) < 1 || len(args) > 2 {
			return usagef(cmd, "takes NAME and an optional ADDR, got %d arguments", len(args))
		}
		if err := mtls.ValidateName(args[0]); err != nil {
			return usagef(cmd, "%v", err)
		}
		addr := ""
		if len(args) == 2 {
			addr = args[1]
			if err := cluster.ValidateAddr(addr); err != nil {
				return usagef(cmd, "%v", err)
			}
		}
		h, err := cluster.Open(env.home)
		if err != nil {
			return err
		}
		before, _ := h.Peer(args[0])
		p, err := h.AddPeer(args[0], addr, time.Now())
		if err != nil {
			return err
		}
		where := p.Addr
		if where == "" {
			where = "no address"
		}
		switch {
		case before.Name == "":
			fmt.Fprintf(env.stdout, "added %q (%s)\n", p.Name, where)
		case !before.Active():
			fmt.Fprintf(env.stdout, "readmitted %q (%s); certificates issued before %s stay refused\n",
				p.Name, where, p.RevokedBefore.Format(time.RFC3339))
		default:
			fmt.Fprintf(env.stdout, "updated %q (%s)\n", p.Name, where)
		}
		return nil
	}
	return cmd
}
