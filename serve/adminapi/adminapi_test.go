//go:build unix

package adminapi

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

func TestErrorRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		status   int
		code     string
		sentinel error
	}{
		{"not found", store.ErrNotFound, http.StatusNotFound, CodeNotFound, store.ErrNotFound},
		{"ambiguous", store.ErrAmbiguousID, http.StatusBadRequest, CodeAmbiguous, store.ErrAmbiguousID},
		{"refused", &store.RefusalError{Err: pack.ErrCorrupt}, http.StatusUnprocessableEntity, CodeRefused, pack.ErrRefused},
		{"invalid", pack.ErrInvalid, http.StatusBadRequest, CodeInvalid, pack.ErrInvalid},
		{"corrupt", pack.ErrCorrupt, http.StatusInternalServerError, CodeCorrupt, pack.ErrCorrupt},
		{"other", errors.New("disk full"), http.StatusInternalServerError, CodeFailed, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := ErrorOf(tc.err)
			if e.Status != tc.status || e.Code != tc.code || e.Message != tc.err.Error() {
				t.Fatalf("ErrorOf(%v): got %+v, want status %d code %s", tc.err, e, tc.status, tc.code)
			}
			if tc.sentinel != nil && !errors.Is(e, tc.sentinel) {
				t.Errorf("the wire error %v does not unwrap to %v", e, tc.sentinel)
			}
		})
	}
}

func TestServeFile(t *testing.T) {
	home := t.TempDir()
	if _, err := ReadServeFile(home); !errors.Is(err, ErrNoServer) {
		t.Fatalf("no serve file: got %v, want ErrNoServer", err)
	}
	sf := ServeFile{URL: "http://127.0.0.1:4949", PID: os.Getpid(), Started: time.Unix(1_800_000_000, 0).UTC()}
	if err := WriteServeFile(home, sf); err != nil {
		t.Fatal(err)
	}
	got, err := ReadServeFile(home)
	if err != nil || got != sf {
		t.Fatalf("read back: got %+v, %v; want %+v", got, err, sf)
	}
	fi, err := os.Stat(filepath.Join(home, ServeFileName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("serve file mode: %v, %v; want 0600", fi.Mode(), err)
	}
	if err := RemoveServeFile(home, sf.PID+1); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadServeFile(home); err != nil {
		t.Fatalf("another process's remove took the file: %v", err)
	}
	if err := RemoveServeFile(home, sf.PID); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadServeFile(home); !errors.Is(err, ErrNoServer) {
		t.Fatalf("after remove: got %v, want ErrNoServer", err)
	}
}

// TestServeFileSpecial: a FIFO or a link in place of the serve file is
// refused at once, never waited on or followed.
func TestServeFileSpecial(t *testing.T) {
	for _, kind := range []string{"fifo", "symlink", "dir"} {
		t.Run(kind, func(t *testing.T) {
			home := t.TempDir()
			path := filepath.Join(home, ServeFileName)
			var err error
			switch kind {
			case "fifo":
				err = syscall.Mkfifo(path, 0o600)
			case "dir":
				err = os.Mkdir(path, 0o700)
			case "symlink":
				target := filepath.Join(t.TempDir(), "real.json")
				os.WriteFile(target, []byte(`{"url":"http://127.0.0.1:1","pid":1,"started":"2026-01-01T00:00:00Z"}`), 0o600)
				err = os.Symlink(target, path)
			}
			if err != nil {
				t.Skip(err)
			}
			if _, err := ReadServeFile(home); err == nil || errors.Is(err, ErrNoServer) {
				t.Fatalf("got %v, want an error about the file", err)
			}
		})
	}
}

func TestParseServeFile(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"good", `{"url":"http://127.0.0.1:4949","pid":7,"started":"2026-01-01T00:00:00Z"}`, true},
		{"with key", `{"url":"http://[::1]:80","pid":7,"admin_key_file":"/k","started":"2026-01-01T00:00:00Z"}`, true},
		{"unknown field", `{"url":"http://127.0.0.1:4949","pid":7,"x":1}`, false},
		{"no port", `{"url":"http://127.0.0.1","pid":7}`, false},
		{"https", `{"url":"https://127.0.0.1:1","pid":7}`, false},
		{"path", `{"url":"http://127.0.0.1:1/x","pid":7}`, false},
		{"no host", `{"url":"http://:4949","pid":7}`, false},
		{"port 0", `{"url":"http://127.0.0.1:0","pid":7}`, false},
		{"port out of range", `{"url":"http://127.0.0.1:65536","pid":7}`, false},
		{"upper-case scheme", `{"url":"HTTP://127.0.0.1:4949","pid":7}`, false},
		{"query", `{"url":"http://127.0.0.1:4949?a=1","pid":7}`, false},
		{"user", `{"url":"http://u@127.0.0.1:4949","pid":7}`, false},
		{"zero pid", `{"url":"http://127.0.0.1:1","pid":0}`, false},
		{"negative pid", `{"url":"http://127.0.0.1:1","pid":-3}`, false},
		{"trailing", `{"url":"http://127.0.0.1:1","pid":7} {}`, false},
		{"not json", `hello`, false},
		{"empty", ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseServeFile([]byte(tc.body))
			if tc.ok != (err == nil) {
				t.Fatalf("got %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrBadServeFile) {
				t.Errorf("got %v, want it to wrap ErrBadServeFile", err)
			}
		})
	}
}

// TestDialRefuses: a serve file naming a dead process or a port where no
// server answers is no server.
func TestDialRefuses(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		name string
		sf   ServeFile
	}{
		{"dead pid", ServeFile{URL: "http://127.0.0.1:1", PID: dead.Process.Pid}},
		{"nothing listening", ServeFile{URL: "http://127.0.0.1:1", PID: os.Getpid()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if err := WriteServeFile(home, tc.sf); err != nil {
				t.Fatal(err)
			}
			_, err := Dial(context.Background(), home)
			if !errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), ServeFileName) {
				t.Fatalf("got %v, want ErrNoServer naming %s", err, ServeFileName)
			}
		})
	}
}

func FuzzParseServeFile(f *testing.F) {
	f.Add([]byte(`{"url":"http://127.0.0.1:4949","pid":7,"started":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"url":"http://[::1]:80","pid":1,"admin_key_file":"/k"}`))
	f.Add([]byte(`{"url":"http://x:1/","pid":9223372036854775807}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sf, err := ParseServeFile(b)
		if err != nil {
			if !errors.Is(err, ErrBadServeFile) {
				t.Fatalf("error %v does not wrap ErrBadServeFile", err)
			}
			return
		}
		if sf.PID <= 0 || !strings.HasPrefix(sf.URL, "http://") {
			t.Fatalf("accepted %+v", sf)
		}
	})
}
