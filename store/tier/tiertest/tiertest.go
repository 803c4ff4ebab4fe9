package tiertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Version is the versitygw release scripts/s3server.sh installs.
const Version = "v1.8.0"

// Credentials of the server's root user.
const (
	AccessKey = "muser-test-access"
	SecretKey = "muser-test-secret-key-0123456789"
)

// Binary returns the server binary's path, or "" if it is not installed.
func Binary() string {
	if p := os.Getenv("MUSER_S3_SERVER"); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	p := filepath.Join(home, ".cache", "muser", "versitygw-"+Version, "versitygw")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// Required reports whether a missing server fails the test rather than
// skipping it (CI=true or MUSER_REQUIRE_S3=1).
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("MUSER_REQUIRE_S3") == "1"
}

// Server is a running S3 server.
type Server struct {
	// Endpoint is its URL (http://127.0.0.1:PORT).
	Endpoint string
	// Dir is the directory its buckets live in.
	Dir string

	t    testing.TB
	cmd  *exec.Cmd
	addr string
	bin  string
	log  string
	exit chan struct{}
}

// Start starts a server for t, stopped by t's cleanup. It skips (or
// fails, see Required) when the binary is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		msg := "no S3 server for the tier tests: run scripts/s3server.sh (or set MUSER_S3_SERVER)"
		if Required() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s := &Server{t: t, bin: bin, Dir: filepath.Join(t.TempDir(), "s3")}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.log = filepath.Join(t.TempDir(), "versitygw.log")
	s.addr = freeAddr(t)
	s.Endpoint = "http://" + s.addr
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Restart starts the server again (after Stop or Kill) on the same
// address and directory, and waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	lf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	// Without --keep-alive (one connection per request): with it,
	// versitygw v1.8.0 answers some requests on a reused connection with
	// 400 "An error occurred when parsing the HTTP request" (bytes of an
	// earlier request it answered early left on the connection), which
	// fails the tests at random (docs/benchmarks.md, "Fleet tier").
	cmd := exec.Command(s.bin, "--access", AccessKey, "--secret", SecretKey, "--port", s.addr, "--quiet", "posix", s.Dir)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID=", "ROOT_SECRET_ACCESS_KEY=")
	if err := cmd.Start(); err != nil {
		lf.Close()
		s.t.Fatalf("starting %s: %v", s.bin, err)
	}
	lf.Close()
	s.cmd = cmd
	s.exit = make(chan struct{})
	go func(c *exec.Cmd, exit chan struct{}) { _ = c.Wait(); close(exit) }(cmd, s.exit)
	// Wait until it answers HTTP (polling, not a time limit on the
	// test: it gives up only when the process has exited).
	for {
		select {
		case <-s.exit:
			b, _ := os.ReadFile(s.log)
			s.t.Fatalf("%s exited at start:\n%s", s.bin, b)
		default:
		}
		resp, err := http.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops the server (SIGKILL: a crash as far as clients can tell)
// and waits for it to exit. It is safe to call more than once.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.exit:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.exit
	}
}

// Client returns a client of the server as its root user.
func (s *Server) Client() *minio.Client {
	s.t.Helper()
	cl, err := minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		s.t.Fatal(err)
	}
	return cl
}

// Bucket creates a bucket with a random name and returns it.
func (s *Server) Bucket() string {
	s.t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "muser-" + hex.EncodeToString(b[:])
	if err := s.Client().MakeBucket(context.Background(), name, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		s.t.Fatalf("make bucket %s: %v", name, err)
	}
	return name
}

// Env sets the AWS variables that point a client at the server for the
// rest of t.
func (s *Server) Env(t testing.TB) {
	t.Setenv("AWS_ENDPOINT_URL", s.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
}

// String describes the server.
func (s *Server) String() string { return fmt.Sprintf("versitygw %s on %s", Version, s.Endpoint) }

// CPUTime returns the CPU time (user and system) the server's process has
// used so far, read from /proc (zero where there is none), so that a
// benchmark can report the server's share beside its own.
func (s *Server) CPUTime() time.Duration {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which ends with the last ')':
	// state is field 3, utime 14 and stime 15 (proc(5)), in clock ticks
	// of 1/100 s on Linux.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	var ticks int64
	for _, v := range f[11:13] {
		var n int64
		if _, err := fmt.Sscan(v, &n); err != nil {
			return 0
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
