package respstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{ID: "resp_1", Created: time.Unix(100, 0).UTC(), Response: json.RawMessage(`{"id":"resp_1"}`),
		Messages: []Message{{Role: "user", Content: "hi"}, {Role: "assistant", ToolCalls: []ToolCall{{ID: "c", Name: "f", Arguments: "{}"}}}}}
	if err := s.Put("alice", rec); err != nil {
		t.Fatal(err)
	}
	// Reopened: the record survives.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		name, tenant, id string
		want             error
	}{
		{"own", "alice", "resp_1", nil},
		{"another tenant", "bob", "resp_1", ErrNotFound},
		{"a tenant whose name is a prefix", "alic", "e\x00resp_1", ErrNotFound},
		{"unknown id", "alice", "resp_2", ErrNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.Get(c.tenant, c.id)
			if !errors.Is(err, c.want) {
				t.Fatalf("got error %v, want %v", err, c.want)
			}
			if c.want == nil && (got.ID != rec.ID || len(got.Messages) != 2 || got.Messages[1].ToolCalls[0].Name != "f" || string(got.Response) != `{"id":"resp_1"}`) {
				t.Errorf("got %+v, want %+v", got, rec)
			}
		})
	}
	if err := s.Delete("bob", "resp_1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob deleting alice's response: got %v, want ErrNotFound", err)
	}
	if err := s.Delete("alice", "resp_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("alice", "resp_1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after Delete: got %v, want ErrNotFound", err)
	}
	big := &Record{ID: "resp_big", Messages: []Message{{Role: "user", Content: strings.Repeat("a", MaxRecordBytes)}}}
	if err := s.Put("alice", big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a record over the bound: got %v, want ErrTooLarge", err)
	}
}

// TestStoreTTL checks that an expired response is not found, that Open
// and Put sweep expired records, and that a TTL of 0 keeps everything.
func TestStoreTTL(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_000_000, 0).UTC()
	clock := func() time.Time { return now }
	put := func(s *Store, tenant, id string, created time.Time) {
		t.Helper()
		if err := s.Put(tenant, &Record{ID: id, Created: created, Response: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(s *Store) int {
		n := 0
		if err := s.db.View(func(tx *bolt.Tx) error { n = tx.Bucket(bucket).Stats().KeyN; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Without a TTL nothing expires.
	s, err := Open(dir, Options{NoSync: true, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	for i, age := range []time.Duration{0, time.Hour, 47 * time.Hour, 49 * time.Hour, 1000 * time.Hour} {
		put(s, "alice", fmt.Sprintf("resp_%d", i), now.Add(-age))
	}
	put(s, "bob", "resp_old", now.Add(-100*time.Hour))
	if _, err := s.Get("alice", "resp_4"); err != nil {
		t.Errorf("without a TTL, a 1000-hour-old response: %v, want it found", err)
	}
	s.Close()

	// A 48-hour TTL: opening sweeps the three older than 48 hours.
	if s, err = Open(dir, Options{NoSync: true, Now: clock, TTL: 48 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := count(s); got != 3 {
		t.Errorf("after opening with a 48h TTL, %d records, want 3", got)
	}
	for _, c := range []struct {
		tenant, id string
		found      bool
	}{{"alice", "resp_0", true}, {"alice", "resp_2", true}, {"alice", "resp_3", false}, {"alice", "resp_4", false}, {"bob", "resp_old", false}} {
		_, err := s.Get(c.tenant, c.id)
		if c.found != (err == nil) || (!c.found && !errors.Is(err, ErrNotFound)) {
			t.Errorf("Get(%s, %s) = %v, want found %v", c.tenant, c.id, err, c.found)
		}
	}
	// Time passes: resp_2 expires; Get says so before any sweep, and a Put
	// an hour after the last sweep removes it.
	now = now.Add(2 * time.Hour)
	_, err = s.Get("alice", "resp_2")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("Get of an expired response: %v, want not found, expired", err)
	}
	put(s, "alice", "resp_new", now)
	if got := count(s); got != 3 {
		t.Errorf("after a Put past the sweep interval, %d records, want 3 (resp_0, resp_1, resp_new)", got)
	}
	if _, err := Open(t.TempDir(), Options{TTL: -time.Second}); err == nil {
		t.Error("a negative TTL opened, want an error")
	}
}
