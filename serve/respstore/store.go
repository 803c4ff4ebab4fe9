package respstore

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// FileName is the store's file under the server's home.
const FileName = "responses.db"

// MaxRecordBytes bounds one record's JSON.
const MaxRecordBytes = 16 << 20

var bucket = []byte("responses")

// Message is one message of a stored conversation, in the form the chat
// template renders.
type Message struct {
	// Role is system, user, assistant or tool.
	Role string `json:"role"`
	// Content is the message's text.
	Content string `json:"content,omitempty"`
	// NullOK marks content that is None to the template (an assistant
	// message that only calls tools).
	NullOK bool `json:"null_content,omitempty"`
	// ToolCallID names the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// ToolCalls are an assistant message's calls.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is a call an assistant message made.
type ToolCall struct {
	// ID is the call's id (call_id in the Responses API).
	ID string `json:"id"`
	// Name is the function's name.
	Name string `json:"name"`
	// Arguments is the arguments' JSON object, as text.
	Arguments string `json:"arguments"`
}

// Record is one stored response.
type Record struct {
	// ID is the response ID ("resp_...").
	ID string `json:"id"`
	// Created is when it was made.
	Created time.Time `json:"created"`
	// Messages is the conversation the response ends: every earlier
	// turn's input and output, this request's input and its output (as
	// an assistant message), without the instructions, which a request
	// does not inherit.
	Messages []Message `json:"messages"`
	// Response is the response object as it was answered, for retrieval.
	Response json.RawMessage `json:"response"`
}

// Options configure a Store.
type Options struct {
	// NoSync opens the file without fsync (tests and benchmarks).
	NoSync bool
	// TTL is how long a response stays stored after it was created; 0
	// keeps responses until they are deleted. An expired response is not
	// found, and expired records are removed when the store opens and
	// then at most once per sweepEvery as responses are stored.
	TTL time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// sweepEvery bounds how often Put sweeps expired records.
const sweepEvery = time.Hour

// Store is the responses file. It is safe for concurrent use.
type Store struct {
	db  *bolt.DB
	ttl time.Duration
	now func() time.Time

	mu        sync.Mutex
	lastSweep time.Time
}

// Open opens (creating if needed) the store under home and removes the
// records that have expired.
func Open(home string, o Options) (*Store, error) {
	if o.TTL < 0 {
		return nil, fmt.Errorf("respstore: TTL %v is negative", o.TTL)
	}
	db, err := bolt.Open(filepath.Join(home, FileName), 0o600, &bolt.Options{Timeout: 5 * time.Second, NoSync: o.NoSync})
	if err != nil {
		return nil, fmt.Errorf("respstore: opening %s: %w", filepath.Join(home, FileName), err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("respstore: %w", err)
	}
	s := &Store{db: db, ttl: o.TTL, now: o.Now}
	if s.now == nil {
		s.now = time.Now
	}
	if _, err := s.Sweep(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// expired reports whether a record created at c has outlived the TTL.
func (s *Store) expired(c time.Time) bool {
	return s.ttl > 0 && !s.now().Before(c.Add(s.ttl))
}

// Sweep removes every expired record and returns how many it removed. A
// record whose value does not decode is left for Get to report.
func (s *Store) Sweep() (int, error) {
	if s.ttl == 0 {
		return 0, nil
	}
	s.mu.Lock()
	s.lastSweep = s.now()
	s.mu.Unlock()
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, v := c.First(); k != nil; {
			var head struct {
				Created time.Time `json:"created"`
			}
			if json.Unmarshal(v, &head) == nil && s.expired(head.Created) {
				at := append([]byte(nil), k...)
				if err := c.Delete(); err != nil {
					return err
				}
				n++
				k, v = c.Seek(at)
				continue
			}
			k, v = c.Next()
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("respstore: sweeping expired responses: %w", err)
	}
	return n, nil
}

// maybeSweep sweeps when the last sweep is sweepEvery old.
func (s *Store) maybeSweep() error {
	if s.ttl == 0 {
		return nil
	}
	s.mu.Lock()
	due := s.now().Sub(s.lastSweep) >= sweepEvery
	s.mu.Unlock()
	if !due {
		return nil
	}
	_, err := s.Sweep()
	return err
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

func key(tenant, id string) []byte { return []byte(tenant + "\x00" + id) }

// Put stores rec under the tenant.
func (s *Store) Put(tenant string, rec *Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return &RecordError{ID: rec.ID, Err: err}
	}
	if len(b) > MaxRecordBytes {
		return &RecordError{ID: rec.ID, Err: fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, len(b), MaxRecordBytes)}
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Put(key(tenant, rec.ID), b)
	}); err != nil {
		return err
	}
	// The record is stored; a failed sweep is retried by the next Put
	// after sweepEvery and by the next Open, and costs only space.
	_ = s.maybeSweep()
	return nil
}

// Get returns the tenant's response id.
func (s *Store) Get(tenant, id string) (*Record, error) {
	var rec Record
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucket).Get(key(tenant, id))
		if v == nil {
			return &RecordError{ID: id, Err: ErrNotFound}
		}
		if err := json.Unmarshal(v, &rec); err != nil || rec.ID != id {
			return &RecordError{ID: id, Err: fmt.Errorf("%w: %v", ErrCorrupt, err)}
		}
		if s.expired(rec.Created) {
			return &RecordError{ID: id, Err: fmt.Errorf("%w: expired at %s", ErrNotFound, rec.Created.Add(s.ttl).UTC().Format(time.RFC3339))}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// Delete removes the tenant's response id.
func (s *Store) Delete(tenant, id string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		k := key(tenant, id)
		if b.Get(k) == nil {
			return &RecordError{ID: id, Err: ErrNotFound}
		}
		return b.Delete(k)
	})
}
