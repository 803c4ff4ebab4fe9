package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/muserhq/muser/serve/adminapi"
	"github.com/muserhq/muser/store"
)

// openAdmin returns the operator API for the store under --home: the
// store itself, opened read-only or read-write, or, when a muser server
// of this home holds it, that server's admin endpoint (found through
// HOME/serve.json), which carries out the command on the store it owns.
// A store held by anything else is still ErrLocked (exit status 5). The
// returned function closes what was opened.
func openAdmin(ctx context.Context, env *cliEnv, readOnly bool) (adminapi.API, func() error, error) {
	s, err := openStore(env, readOnly, false)
	if err == nil {
		return adminapi.Local{Store: s}, s.Close, nil
	}
	if !errors.Is(err, store.ErrLocked) {
		return nil, nil, err
	}
	c, derr := adminapi.Dial(ctx, env.home)
	if derr != nil {
		if errors.Is(derr, adminapi.ErrNoServer) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%w; the muser server that holds it refused: %w", err, derr)
	}
	return c, func() error { return nil }, nil
}
