package tier

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/muserhq/muser/pack"
	"github.com/zeebo/blake3"
)

// Rules of docs/tier.md, "Consistency and gc", that every writer and gc
// share.
const (
	// RefreshAge (rule G1): an uploader re-puts a chunk object whose
	// last-modified time is older than this instead of counting it as
	// present, so a chunk a new manifest names is never eligible for gc
	// while that manifest is being written.
	RefreshAge = 6 * time.Hour
	// MaxUploadTime (rule G2): an upload that has run this long writes no
	// manifest.
	MaxUploadTime = 3 * time.Hour
	// MinGrace (rule G3) is the shortest gc grace period: RefreshAge plus
	// MaxUploadTime plus MaxGCTime.
	MinGrace = RefreshAge + MaxUploadTime + MaxGCTime
	// MaxGCTime (rule G4): a gc that has run this long deletes nothing more.
	MaxGCTime = 3 * time.Hour
	// DefaultGrace is muser pack gc --tier's grace period.
	DefaultGrace = 24 * time.Hour
)

// keyContext is the BLAKE3 derive-key context of a cluster's tier key.
const keyContext = "muser fleet tier seal key v1"

// ClusterKey derives the tier's seal key from a cluster's link secret:
// every node of the cluster derives the same key, and it differs from
// every replication link key.
func ClusterKey(linkSecret []byte) []byte {
	k := make([]byte, 32)
	blake3.DeriveKey(keyContext, linkSecret, k)
	return k
}

// Config says how to reach a tier.
type Config struct {
	// Location is the bucket and prefix.
	Location Location
	// Endpoint is the S3 server's URL (http:// or https://); empty means
	// AWS (https://s3.amazonaws.com). A non-AWS endpoint is addressed
	// path-style (self-hosted servers rarely have per-bucket DNS names).
	Endpoint string
	// AccessKey, SecretKey and SessionToken are the credentials; all empty
	// means the standard AWS environment variables, then the shared
	// credentials file (~/.aws/credentials, AWS_PROFILE).
	AccessKey, SecretKey, SessionToken string
	// Region is the bucket's region (default us-east-1).
	Region string
	// Key is the seal key (at least pack.MinSealKey bytes): manifests are
	// sealed with it and manifests not sealed with it are refused.
	Key []byte
	// Producer names this node in the seals it writes.
	Producer string
	// Transport, when non-nil, carries the requests (tests inject faults).
	Transport http.RoundTripper
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// ConfigFromEnv fills a Config's endpoint, credentials and region from
// the standard AWS variables: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL,
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION
// or AWS_DEFAULT_REGION. Credentials left empty are then read by Open from
// the shared credentials file.
func ConfigFromEnv(loc Location, key []byte, producer string) Config {
	c := Config{Location: loc, Key: key, Producer: producer}
	c.Endpoint = os.Getenv("AWS_ENDPOINT_URL_S3")
	if c.Endpoint == "" {
		c.Endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	c.AccessKey = os.Getenv("AWS_ACCESS_KEY_ID")
	c.SecretKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
	c.SessionToken = os.Getenv("AWS_SESSION_TOKEN")
	c.Region = os.Getenv("AWS_REGION")
	if c.Region == "" {
		c.Region = os.Getenv("AWS_DEFAULT_REGION")
	}
	return c
}

// Tier is a bucket prefix holding sealed manifests and their chunks. It
// is safe for concurrent use.
type Tier struct {
	cfg Config
	cl  *minio.Client
	now func() time.Time
}

// Open returns a Tier for cfg. It makes no request: a tier that is down
// at start is only slower to be useful (Check probes it).
func Open(cfg Config) (*Tier, error) {
	if len(cfg.Key) < pack.MinSealKey {
		return nil, fmt.Errorf("%w: the key is %d bytes, need at least %d", ErrNoKey, len(cfg.Key), pack.MinSealKey)
	}
	if cfg.Location.Bucket == "" {
		return nil, fmt.Errorf("%w: no bucket", ErrBadURL)
	}
	endpoint, secure, path := "s3.amazonaws.com", true, false
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("%w: endpoint %q: want http(s)://HOST[:PORT]", ErrBadURL, cfg.Endpoint)
		}
		endpoint, secure = u.Host, u.Scheme == "https"
		path = !strings.HasSuffix(u.Hostname(), "amazonaws.com")
	}
	var creds *credentials.Credentials
	if cfg.AccessKey != "" || cfg.SecretKey != "" {
		creds = credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)
	} else {
		creds = credentials.NewChainCredentials([]credentials.Provider{&credentials.EnvAWS{}, &credentials.FileAWSCredentials{}})
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	lookup := minio.BucketLookupDNS
	if path {
		lookup = minio.BucketLookupPath
	}
	cl, err := minio.New(endpoint, &minio.Options{Creds: creds, Secure: secure, Region: cfg.Region,
		BucketLookup: lookup, Transport: cfg.Transport, MaxRetries: 1})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Tier{cfg: cfg, cl: cl, now: now}, nil
}

// Location returns the tier's bucket and prefix.
func (t *Tier) Location() Location { return t.cfg.Location }

// String returns the tier's URL.
func (t *Tier) String() string { return t.cfg.Location.String() }

// Source is how receipts name the tier: "tier:s3://BUCKET/PREFIX".
func (t *Tier) Source() string { return "tier:" + t.cfg.Location.String() }

// Check probes the bucket: it exists and the credentials may list it.
func (t *Tier) Check(ctx context.Context) error {
	ok, err := t.cl.BucketExists(ctx, t.cfg.Location.Bucket)
	if err != nil {
		return t.opError("check", "", err)
	}
	if !ok {
		return &OpError{Op: "check", Key: t.cfg.Location.Bucket, Err: fmt.Errorf("%w: the bucket does not exist", ErrUnavailable)}
	}
	return nil
}

// opError wraps an S3 client error.
func (t *Tier) opError(op, key string, err error) error {
	if err == nil {
		return nil
	}
	resp := minio.ToErrorResponse(err)
	if resp.StatusCode == http.StatusNotFound && resp.Code != "NoSuchBucket" && op != "check" {
		return &OpError{Op: op, Key: key, Err: fmt.Errorf("%w: %v", ErrNotFound, err)}
	}
	return &OpError{Op: op, Key: key, Err: fmt.Errorf("%w: %v", ErrUnavailable, err)}
}

// object is one listed object.
type object struct {
	Key      string
	Size     int64
	Modified time.Time
	ETag     string
	// Dir marks a folder (a key prefix ending in "/") inside the layout
	// directory: nothing of this tier's, since the layout has no folders
	// (another tier's prefix may lie below this one's). It is listed, not
	// read, and never deleted.
	Dir bool
}

// list returns the objects directly under the layout directory dir (the
// keys whose rest has no "/"), and each folder below it as one Dir entry.
func (t *Tier) list(ctx context.Context, dir string) ([]object, error) {
	prefix := t.cfg.Location.key(dir)
	var out []object
	for o := range t.cl.ListObjects(ctx, t.cfg.Location.Bucket, minio.ListObjectsOptions{Prefix: prefix}) {
		if o.Err != nil {
			return nil, t.opError("list", prefix, o.Err)
		}
		out = append(out, object{Key: o.Key, Size: o.Size, Modified: o.LastModified, ETag: o.ETag, Dir: strings.HasSuffix(o.Key, "/")})
	}
	return out, nil
}

// digestKey parses the HEX of a layout key, the key of the layout
// directory dir followed by the canonical hex of a digest, and nothing
// else.
func (t *Tier) digestKey(key, dir string) (pack.Digest, bool) {
	rest, ok := strings.CutPrefix(key, t.cfg.Location.key(dir))
	if !ok {
		return pack.Digest{}, false
	}
	d, err := pack.ParseDigest(rest)
	if err != nil || d.String() != rest {
		return pack.Digest{}, false
	}
	return d, true
}

// stat returns an object's size and last-modified time.
func (t *Tier) stat(ctx context.Context, key string) (object, error) {
	st, err := t.cl.StatObject(ctx, t.cfg.Location.Bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return object{}, t.opError("stat", key, err)
	}
	return object{Key: key, Size: st.Size, Modified: st.LastModified, ETag: st.ETag}, nil
}

// get reads an object whole, refusing one longer than limit.
func (t *Tier) get(ctx context.Context, key string, limit int64) ([]byte, error) {
	return t.getInto(ctx, key, limit, nil)
}

// getInto is get reading into buf (grown as needed; a chunk's exact size
// is known, so a buffer of it is never grown).
func (t *Tier) getInto(ctx context.Context, key string, limit int64, buf []byte) ([]byte, error) {
	o, err := t.cl.GetObject(ctx, t.cfg.Location.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, t.opError("get", key, err)
	}
	defer o.Close()
	b := buf[:0]
	if int64(cap(b)) < min(limit+1, 1<<20) {
		b = make([]byte, 0, min(limit+1, 1<<20))
	}
	for {
		if len(b) == cap(b) {
			if int64(len(b)) > limit {
				break
			}
			b = append(b, 0)[:len(b)]
		}
		n, err := o.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, t.opError("get", key, err)
		}
	}
	if int64(len(b)) > limit {
		return nil, &ObjectError{Key: key, Err: &pack.LimitError{Object: "tier object " + key, Field: "size", Got: uint64(len(b)), Max: uint64(limit)}}
	}
	return b, nil
}

// put writes an object; with exclusive set, only if no object has the key
// (If-None-Match: *), reporting false if one did.
func (t *Tier) put(ctx context.Context, key string, data []byte, exclusive bool) (bool, error) {
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true}
	if exclusive {
		opts.SetMatchETagExcept("*")
	}
	_, err := t.cl.PutObject(ctx, t.cfg.Location.Bucket, key, bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		if resp := minio.ToErrorResponse(err); exclusive && resp.StatusCode == http.StatusPreconditionFailed {
			return false, nil
		}
		return false, t.opError("put", key, err)
	}
	return true, nil
}

// remove deletes an object.
func (t *Tier) remove(ctx context.Context, key string) error {
	if err := t.cl.RemoveObject(ctx, t.cfg.Location.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return t.opError("delete", key, err)
	}
	return nil
}

func (t *Tier) chunkKey(id pack.Digest) string { return t.cfg.Location.key(dirChunks + id.String()) }
func (t *Tier) manifestKey(id pack.Digest) string {
	return t.cfg.Location.key(dirManifests + id.String())
}

// seal seals pack id for the tier. Tier seals are not checked against a
// replay ledger (a stored manifest is read many times), so the
// generation is informational: the sealing time in Unix nanoseconds.
func (t *Tier) seal(id pack.Digest) (pack.Seal, error) {
	var nonce [pack.NonceSize]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return pack.Seal{}, err
	}
	return pack.NewSeal(t.cfg.Key, id, t.cfg.Producer, uint64(t.now().UnixNano()), nonce)
}

// Manifest reads, decodes and authenticates the manifest object of pack
// id: the layout, the seal under the tier's key, and that the manifest
// hashes to id and decodes. It returns the seal, the manifest's bytes and
// the manifest. A fault is an *ObjectError.
func (t *Tier) Manifest(ctx context.Context, id pack.Digest) (pack.Seal, []byte, *pack.Manifest, error) {
	key := t.manifestKey(id)
	b, err := t.get(ctx, key, int64(MaxObjectBytes))
	if err != nil {
		return pack.Seal{}, nil, nil, err
	}
	return t.decodeManifest(key, id, b)
}

func (t *Tier) decodeManifest(key string, id pack.Digest, b []byte) (pack.Seal, []byte, *pack.Manifest, error) {
	seal, mb, err := DecodeObject(b)
	if err != nil {
		return seal, nil, nil, &ObjectError{Key: key, Err: err}
	}
	if got := pack.PackID(mb); got != id {
		return seal, mb, nil, &ObjectError{Key: key, Err: &pack.DigestError{Kind: pack.DigestManifest, Object: "tier manifest " + id.Short(), Expected: id, Actual: got}}
	}
	if err := seal.Verify(t.cfg.Key, id); err != nil {
		return seal, mb, nil, &ObjectError{Key: key, Err: err}
	}
	m, err := pack.DecodeManifest(mb)
	if err != nil {
		return seal, mb, nil, &ObjectError{Key: key, Err: err}
	}
	return seal, mb, m, nil
}

// isNotFound reports whether err says an object is absent.
func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
