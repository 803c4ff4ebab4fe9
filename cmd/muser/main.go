package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/muserhq/muser/infer/engine/cuda"
	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// Exit codes. They are the only place an error becomes a number: every
// command returns an error and exitCode decides. The table is printed by
// `muser --help` (see exitStatusHelp) and must stay in step with it.
const (
	exitOK       = 0   // success
	exitFailure  = 1   // the operation failed, or a check found faults
	exitUsage    = 2   // bad flags or arguments
	exitNotFound = 3   // a named pack, receipt, node or file does not exist, or an ID prefix is ambiguous
	exitRefused  = 4   // input was refused (fail closed) and a receipt records why
	exitLocked   = 5   // the store under --home is held by another process
	exitSignal   = 130 // interrupted by SIGINT or SIGTERM
)

const exitStatusHelp = `EXIT STATUS
  0    success
  1    the operation failed, or a check found faults ("N errors found")
  2    bad flags or arguments
  3    a named pack, receipt, node or file does not exist, or an ID prefix is ambiguous
  4    input was refused (identity mismatch, bad digest or seal, replay); a receipt records why
  5    the store under --home is in use by another process (pack ls/inspect/
       verify/gc/rm/pin/unpin/import/export and receipts ls/show run through a
       muser server that owns it instead)
  130  interrupted
`

// exitCode maps an error returned by a command to the process exit status.
func exitCode(err error) int {
	var (
		uerr *usageError
		oerr *outputError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &uerr):
		return exitUsage
	case errors.Is(err, context.Canceled):
		return exitSignal
	case errors.As(err, &oerr):
		return exitFailure
	case errors.Is(err, store.ErrLocked):
		return exitLocked
	case errors.Is(err, pack.ErrRefused):
		return exitRefused
	case errors.Is(err, cuda.ErrNoDriver), errors.Is(err, cuda.ErrNoDevice):
		// A GPU that cannot be used is a failure, even where the cause
		// is a library file that does not exist.
		return exitFailure
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrAmbiguousID),
		errors.Is(err, cluster.ErrNodeNotFound), errors.Is(err, &wire.Error{Code: wire.CodeNotFound}),
		errors.Is(err, os.ErrNotExist):
		return exitNotFound
	default:
		return exitFailure
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one muser command line and returns its exit status. Tests
// call it directly with their own streams.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := &cliEnv{stdin: stdin, stdout: stdout, stderr: stderr}
	err := dispatch(ctx, env, args)
	var (
		uerr *usageError
		rerr *reportedError
	)
	switch {
	case err == nil, errors.As(err, &rerr):
		// Nothing to print: success, or the command already said it all.
	case errors.As(err, &uerr) && uerr.cmd != nil:
		fmt.Fprintf(stderr, "muser %s: %s\n", uerr.cmd.name, printableLines(uerr.err.Error()))
		fmt.Fprintf(stderr, "Run 'muser %s --help' for usage.\n", uerr.cmd.name)
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "muser: interrupted")
	default:
		// A peer's refusal or a file's bytes may be quoted in err.
		fmt.Fprintf(stderr, "muser: %s\n", printableLines(err.Error()))
	}
	return exitCode(err)
}
