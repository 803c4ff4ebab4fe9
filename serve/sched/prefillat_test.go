package sched

import (
	"context"
	"testing"

	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/pack"
)

// TestPrefillAt: a RemotePrefill hook that notes a producer makes
// Result.PrefillAt name it and RemoteDone fall between Started and
// Restored; a hook that does not note one leaves PrefillAt empty.
func TestPrefillAt(t *testing.T) {
	e := loadEnv(t)
	st := openStore(t, t.TempDir())
	defer st.Close()
	s := e.newSched(t, st, func(c *Config) {
		c.RemotePrefill = func(ctx context.Context, id pack.Identity, salt []byte, tokens []int32) error {
			if string(salt) == "remote" {
				NotePrefillAt(ctx, "producer-1")
			}
			return nil
		}
	})
	p := e.encode(t, infertest.Story(0, 150))
	for _, tc := range []struct {
		salt, want string
	}{{"remote", "producer-1"}, {"local", ""}} {
		t.Run(tc.salt, func(t *testing.T) {
			r := run(t, s, &Request{ID: tc.salt, Prompt: p, Salt: []byte(tc.salt), MaxTokens: 2})
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.res.PrefillAt != tc.want {
				t.Errorf("PrefillAt: got %q, want %q", r.res.PrefillAt, tc.want)
			}
			if r.res.RemoteDone.IsZero() || r.res.RemoteDone.Before(r.res.Started) || r.res.Restored.Before(r.res.RemoteDone) {
				t.Errorf("times: started %v, remote done %v, restored %v; want started ≤ remote done ≤ restored",
					r.res.Started, r.res.RemoteDone, r.res.Restored)
			}
		})
	}
	// Outside a hook it does nothing (and does not panic).
	NotePrefillAt(context.Background(), "nobody")
}
