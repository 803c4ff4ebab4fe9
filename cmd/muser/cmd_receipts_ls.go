package main

import (
	"context"
	"strings"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/serve/adminapi"
	"github.com/spf13/pflag"
)

func newReceiptsLsCommand() *command {
	var (
		asJSON bool
		reason string
		since  time.Duration
	)
	cmd := &command{
		name:    "receipts ls",
		summary: "list refusal receipts, oldest first",
		help: `Lists the receipts of refusals: ID, time, reason code, pack, source and
detail. Reason codes: ` + reasonList() + `.
--since limits the list to the last DURATION (e.g. 24h). The store is
opened read-only.`,
		home: true,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&reason, "reason", "", "only receipts with reason code `R`")
			fs.DurationVar(&since, "since", 0, "only receipts from the last `DURATION`")
			fs.BoolVar(&asJSON, "json", false, "print JSON")
		},
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) > 0 {
			return usagef(cmd, "takes no arguments, got %q", args[0])
		}
		var f adminapi.ReceiptQuery
		if reason != "" {
			r, err := pack.ParseReason(reason)
			if err != nil {
				return usagef(cmd, "--reason: %v", err)
			}
			f.Reason = r
		}
		if since < 0 {
			return usagef(cmd, "--since must not be negative")
		}
		if since > 0 {
			f.Since = time.Now().Add(-since)
		}
		a, done, err := openAdmin(ctx, env, true)
		if err != nil {
			return err
		}
		defer done()
		rs, err := a.Receipts(ctx, f)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(env.stdout, rs)
		}
		t := &table{}
		t.add("ID", "TIME", "REASON", "PACK", "SOURCE", "DETAIL")
		for _, r := range rs {
			p := "-"
			if !r.Pack.IsZero() {
				p = r.Pack.Short()
			}
			t.add(r.ID, formatTime(r.Time), string(r.Reason), p, r.Source, shorten(printable(r.Detail), 100))
		}
		t.write(env.stdout)
		return nil
	}
	return cmd
}

func reasonList() string {
	s := make([]string, len(pack.Reasons))
	for i, r := range pack.Reasons {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}
