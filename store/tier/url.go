package tier

import (
	"fmt"
	"strings"
)

// Location is a tier's bucket and key prefix.
type Location struct {
	// Bucket is the S3 bucket name.
	Bucket string
	// Prefix is the key prefix without leading or trailing slashes; empty
	// means the bucket's root.
	Prefix string
}

// ParseURL parses s3://BUCKET[/PREFIX]. The bucket follows S3's naming
// rules (3 to 63 lower-case letters, digits, dots and hyphens, starting
// and ending with a letter or digit); the prefix's segments are non-empty
// and printable, without "." or ".." segments.
func ParseURL(s string) (Location, error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return Location{}, fmt.Errorf("%w %q: want s3://BUCKET[/PREFIX]", ErrBadURL, s)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if err := checkBucket(bucket); err != nil {
		return Location{}, fmt.Errorf("%w %q: bucket %v", ErrBadURL, s, err)
	}
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix != "" {
		if len(prefix) > 512 {
			return Location{}, fmt.Errorf("%w %q: prefix is %d bytes, at most 512", ErrBadURL, s, len(prefix))
		}
		for _, seg := range strings.Split(prefix, "/") {
			if seg == "" || seg == "." || seg == ".." {
				return Location{}, fmt.Errorf("%w %q: prefix segment %q", ErrBadURL, s, seg)
			}
			for _, r := range seg {
				if r < 0x21 || r == 0x7f || r > 0x7e {
					return Location{}, fmt.Errorf("%w %q: prefix holds %q", ErrBadURL, s, r)
				}
			}
		}
	}
	return Location{Bucket: bucket, Prefix: prefix}, nil
}

func checkBucket(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("%q is %d characters, want 3 to 63", b, len(b))
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && c != '.' && c != '-' {
			return fmt.Errorf("%q holds %q", b, c)
		}
		if (i == 0 || i == len(b)-1) && !alnum {
			return fmt.Errorf("%q must start and end with a letter or digit", b)
		}
	}
	return nil
}

// String returns the location as s3://BUCKET[/PREFIX].
func (l Location) String() string {
	if l.Prefix == "" {
		return "s3://" + l.Bucket
	}
	return "s3://" + l.Bucket + "/" + l.Prefix
}

// key returns the object key of name (a layout path such as
// "chunks/HEX") under the prefix.
func (l Location) key(name string) string {
	if l.Prefix == "" {
		return name
	}
	return l.Prefix + "/" + name
}
