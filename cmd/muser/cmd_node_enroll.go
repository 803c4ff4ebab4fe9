package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/net/mtls"
	"github.com/spf13/pflag"
)

type nodeEnrollOptions struct {
	output   string
	validFor time.Duration
}

func (o *nodeEnrollOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.output, "output", "o", "", "write the bundle to this file (required; must not exist)")
	fs.DurationVar(&o.validFor, "valid-for", mtls.DefaultNodeValidity, "validity of the node's certificate")
}

func newNodeEnrollCommand() *command {
	var opts nodeEnrollOptions
	cmd := &command{
		name:    "node enroll",
		args:    "NAME",
		summary: "issue a bundle that lets a new node called NAME join the cluster",
		help: `On a CA holder: issues a certificate for NAME and writes a bundle holding
that certificate and its private key, the cluster CA certificate and the
link secret (mode 0600). Move it to the new node over a channel you trust,
run 'muser node join BUNDLE' there, then delete it: it is a credential.

NAME is also added to this node's registry (without an address), so NAME
can connect here at once; give its address with 'muser node add NAME ADDR'
to push or pull to it. Enrolling a removed name readmits it with the new
certificate only.`,
		flags: opts.AddFlags,
		home:  true,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) != 1 {
			return usagef(cmd, "takes exactly one NAME, got %d arguments", len(args))
		}
		if err := mtls.ValidateName(args[0]); err != nil {
			return usagef(cmd, "%v", err)
		}
		if opts.output == "" {
			return usagef(cmd, "-o BUNDLE is required")
		}
		if opts.validFor <= 0 || opts.validFor > mtls.MaxNodeValidity {
			return usagef(cmd, "--valid-for %v is out of range (0, %v]", opts.validFor, mtls.MaxNodeValidity)
		}
		if _, err := os.Lstat(opts.output); err == nil {
			return fmt.Errorf("%s already exists; choose another -o or remove it", opts.output)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		h, err := cluster.Open(env.home)
		if err != nil {
			return err
		}
		// The node is admitted only once its bundle is written: a failed
		// write leaves the registry as it was.
		now := time.Now()
		b, err := h.Issue(args[0], now, opts.validFor)
		if err != nil {
			return err
		}
		data, err := b.MarshalBinary()
		if err != nil {
			return err
		}
		if err := writeNewFile(opts.output, data); err != nil {
			return &outputError{path: opts.output, err: err}
		}
		if err := h.Admit(args[0], now); err != nil {
			_ = os.Remove(opts.output)
			return err
		}
		fmt.Fprintf(env.stdout, "enrolled %q (certificate valid until %s)\nbundle written to %s (mode 0600): run 'muser node join %s' on %s, then delete it\n",
			b.Node.Name, b.Node.Cert.NotAfter.Format(time.RFC3339), opts.output, opts.output, b.Node.Name)
		return nil
	}
	return cmd
}

// writeNewFile creates path (which must not exist) with mode 0600 and
// writes data to it durably.
func writeNewFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}
