package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

func newReceiptsShowCommand() *command {
	var asJSON bool
	cmd := &command{
		name:    "receipts show",
		args:    "ID",
		summary: "show one receipt in full",
		help: `Prints a receipt: when, why (reason code and detail), which pack from
which source, the differing identity fields with both values, and the
expected and actual digests. ID may be a unique hex prefix (1 to 32 hex
digits; anything else is a usage error).`,
		home:  true,
		flags: func(fs *pflag.FlagSet) { fs.BoolVar(&asJSON, "json", false, "print JSON") },
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) != 1 {
			return usagef(cmd, "takes exactly one receipt ID, got %d arguments", len(args))
		}
		if r := args[0]; r == "" || len(r) > 32 || strings.Trim(strings.ToLower(r), "0123456789abcdef") != "" {
			return usagef(cmd, "receipt ID %q: want 1 to 32 hex digits", r)
		}
		a, done, err := openAdmin(ctx, env, true)
		if err != nil {
			return err
		}
		defer done()
		r, err := a.Receipt(ctx, args[0])
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(env.stdout, r)
		}
		w := env.stdout
		fmt.Fprintf(w, "receipt   %s\n", r.ID)
		fmt.Fprintf(w, "time      %s\n", r.Time.UTC().Format(time.RFC3339Nano))
		fmt.Fprintf(w, "reason    %s\n", r.Reason)
		if !r.Pack.IsZero() {
			fmt.Fprintf(w, "pack      %s\n", r.Pack)
		}
		fmt.Fprintf(w, "source    %s\n", printable(r.Source))
		fmt.Fprintf(w, "detail    %s\n", printable(r.Detail))
		for _, f := range r.Fields {
			fmt.Fprintf(w, "field     %s: want %s, got %s\n", f.Field, f.Want, f.Got)
		}
		if r.Block != nil {
			fmt.Fprintf(w, "block     %d\n", *r.Block)
		}
		if !r.Chunk.IsZero() {
			fmt.Fprintf(w, "chunk     %s\n", r.Chunk)
		}
		if !r.Expected.IsZero() || !r.Actual.IsZero() {
			fmt.Fprintf(w, "expected  %s\n", r.Expected)
			fmt.Fprintf(w, "actual    %s\n", r.Actual)
		}
		return nil
	}
	return cmd
}
