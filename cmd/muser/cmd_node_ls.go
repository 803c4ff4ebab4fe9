package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/store"
	"github.com/spf13/pflag"
)

type nodeLsOptions struct {
	json bool
}

func (o *nodeLsOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print the registry as JSON")
}

func newNodeLsCommand() *command {
	var opts nodeLsOptions
	cmd := &command{
		name:    "node ls",
		summary: "list this node's cluster and the peers it admits",
		help: `Prints the cluster ID, this node's name and the end of its certificate's
validity, and one line per peer in the registry: NAME, ADDR, STATE (active
or removed), ADDED and REMOVED.`,
		flags: opts.AddFlags,
		home:  true,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) > 0 {
			return usagef(cmd, "takes no arguments, got %q", args[0])
		}
		h, err := cluster.Open(env.home)
		if err != nil {
			return err
		}
		peers, err := h.Peers()
		if err != nil {
			return err
		}
		info := h.Info()
		var notAfter time.Time
		if cred, err := h.Credential(time.Now()); err == nil {
			notAfter = cred.Cert.NotAfter
		} else {
			fmt.Fprintf(env.stderr, "muser node ls: this node's credential: %v\n", err)
		}
		if opts.json {
			enc := json.NewEncoder(env.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(nodeRegistry(h, peers, notAfter))
		}
		role := ""
		if h.CAHolder() {
			role = ", CA holder"
		}
		fmt.Fprintf(env.stdout, "cluster %s, this node %q%s", info.ClusterID, info.Name, role)
		if !notAfter.IsZero() {
			fmt.Fprintf(env.stdout, ", certificate valid until %s", notAfter.Local().Format(time.DateOnly))
		}
		fmt.Fprintln(env.stdout)
		if len(peers) == 0 {
			fmt.Fprintln(env.stdout, "no peers")
			return nil
		}
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tADDR\tSTATE\tADDED\tREMOVED")
		for _, p := range peers {
			addr, removed := p.Addr, "-"
			if addr == "" {
				addr = "-"
			}
			if !p.Active() {
				removed = p.Removed.Local().Format(time.DateTime)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, addr, peerState(p), p.Added.Local().Format(time.DateTime), removed)
		}
		return tw.Flush()
	}
	return cmd
}

func peerState(p cluster.Peer) string {
	if p.Active() {
		return "active"
	}
	return "removed"
}

// nodeRegistryOut is what `muser node ls --json` prints.
type nodeRegistryOut struct {
	ClusterID    string     `json:"cluster_id"`
	Name         string     `json:"name"`
	CAHolder     bool       `json:"ca_holder"`
	CertNotAfter time.Time  `json:"cert_not_after,omitzero"`
	Peers        []peerJSON `json:"peers"`
}

type peerJSON struct {
	cluster.Peer
	State string `json:"state"`
}

func nodeRegistry(h *cluster.Home, peers []cluster.Peer, notAfter time.Time) nodeRegistryOut {
	info := h.Info()
	out := nodeRegistryOut{ClusterID: info.ClusterID, Name: info.Name, CAHolder: h.CAHolder(), CertNotAfter: notAfter, Peers: []peerJSON{}}
	for _, p := range peers {
		out.Peers = append(out.Peers, peerJSON{Peer: p, State: peerState(p)})
	}
	return out
}

// nodeRegistryJSON is `muser node ls --json`'s document for the node
// under home: what a server's GET /admin/v1/nodes answers.
func nodeRegistryJSON(home string) ([]byte, error) {
	h, err := cluster.Open(home)
	if errors.Is(err, cluster.ErrNotInitialized) {
		return nil, fmt.Errorf("%w: %v", store.ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	peers, err := h.Peers()
	if err != nil {
		return nil, err
	}
	var notAfter time.Time
	if cred, err := h.Credential(time.Now()); err == nil {
		notAfter = cred.Cert.NotAfter
	}
	return json.Marshal(nodeRegistry(h, peers, notAfter))
}
