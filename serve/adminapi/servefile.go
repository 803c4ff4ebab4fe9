package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ServeFileName is the file a running server writes into its home.
const ServeFileName = "serve.json"

// maxServeFile bounds the serve file read.
const maxServeFile = 64 << 10

// ServeFile says how to reach the server that owns a home's store. The
// server writes it once it listens (atomically: a temporary file renamed
// into place) and removes it when it stops.
type ServeFile struct {
	// URL is the server's base URL.
	URL string `json:"url"`
	// PID is the server's process ID.
	PID int `json:"pid"`
	// AdminKeyFile is the absolute path of the admin key file, empty when
	// the admin endpoint admits loopback clients without a key.
	AdminKeyFile string `json:"admin_key_file,omitempty"`
	// Started is when the server began to listen.
	Started time.Time `json:"started"`
}

// WriteServeFile writes sf as home's serve file, mode 0600.
func WriteServeFile(home string, sf ServeFile) error {
	b, err := json.MarshalIndent(sf, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(home, ".tmp-serve-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(home, ServeFileName))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", filepath.Join(home, ServeFileName), err)
	}
	return nil
}

// RemoveServeFile removes home's serve file if it names process pid (a
// newer server's file is left alone).
func RemoveServeFile(home string, pid int) error {
	sf, err := ReadServeFile(home)
	if err != nil || sf.PID != pid {
		return nil
	}
	err = os.Remove(filepath.Join(home, ServeFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// ReadServeFile reads home's serve file. A missing file wraps
// ErrNoServer; a malformed one is an error naming the file.
func ReadServeFile(home string) (ServeFile, error) {
	path := filepath.Join(home, ServeFileName)
	f, err := os.OpenFile(path, openFlags, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return ServeFile{}, fmt.Errorf("%w (no %s)", ErrNoServer, path)
	}
	if err != nil {
		return ServeFile{}, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ServeFile{}, fmt.Errorf("%s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxServeFile+1))
	if err != nil {
		return ServeFile{}, err
	}
	if len(b) > maxServeFile {
		return ServeFile{}, fmt.Errorf("%s: larger than %d bytes", path, maxServeFile)
	}
	sf, err := ParseServeFile(b)
	if err != nil {
		return ServeFile{}, fmt.Errorf("%s: %w", path, err)
	}
	return sf, nil
}

// ParseServeFile decodes a serve file: one JSON object with exactly the
// ServeFile fields, a positive pid and an http:// URL of a host and port.
func ParseServeFile(b []byte) (ServeFile, error) {
	var sf ServeFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sf); err != nil {
		return ServeFile{}, fmt.Errorf("%w: %v", ErrBadServeFile, err)
	}
	if dec.More() {
		return ServeFile{}, fmt.Errorf("%w: data after the object", ErrBadServeFile)
	}
	if !serveURL(sf.URL) {
		return ServeFile{}, fmt.Errorf("%w: url %q: want http://HOST:PORT", ErrBadServeFile, sf.URL)
	}
	if sf.PID <= 0 {
		return ServeFile{}, fmt.Errorf("%w: pid %d: want a positive process ID", ErrBadServeFile, sf.PID)
	}
	return sf, nil
}

// serveURL reports whether s is http://HOST:PORT[/] as the server writes
// it: the scheme in lower case, a host, a port from 1 to 65535, and no
// user, path, query or fragment.
func serveURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || !strings.HasPrefix(s, "http://") || u.User != nil || u.Hostname() == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return false
	}
	port, err := strconv.Atoi(u.Port())
	return err == nil && port >= 1 && port <= 65535
}

// Dial returns a client for the running server that owns home's store:
// its serve file must name a live process whose admin endpoint answers.
// Anything else wraps ErrNoServer (or is the admin endpoint's refusal).
func Dial(ctx context.Context, home string) (*Client, error) {
	sf, err := ReadServeFile(home)
	if err != nil {
		return nil, err
	}
	if !alive(sf.PID) {
		return nil, fmt.Errorf("%w: %s names process %d, which is not running", ErrNoServer, ServeFileName, sf.PID)
	}
	c := &Client{URL: sf.URL, HTTP: &http.Client{}}
	if sf.AdminKeyFile != "" {
		b, err := os.ReadFile(sf.AdminKeyFile)
		if err != nil {
			return nil, fmt.Errorf("the server's admin key: %w", err)
		}
		c.Key = strings.TrimSpace(string(b))
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.Stats(pctx); err != nil {
		var ae *Error
		if errors.As(err, &ae) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s at %s does not answer: %v", ErrNoServer, ServeFileName, sf.URL, err)
	}
	return c, nil
}
