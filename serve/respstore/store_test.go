package respstore

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, true)
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
	if s, err = Open(dir, true); err != nil {
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
