package defaultmodel

import "errors"

// ErrDigest is returned when the embedded model's bytes do not hash to
// SHA256: the binary was built with a model file other than the one this
// package documents.
var ErrDigest = errors.New("defaultmodel: embedded model does not match its recorded sha256")
