package pack

import "errors"

// ErrCorrupt marks bytes that do not decode, exceed a limit, or do not match
// their digest. Errors from every decoder and verifier in muser wrap it, so
// any layer can recognise corruption with errors.Is.
var ErrCorrupt = errors.New("corrupt")

// ErrRefused marks input that muser refused to use (fail closed): an
// identity mismatch, a digest or seal that does not verify, a replay. The
// refusing layer records a receipt; errors.Is(err, ErrRefused) maps to the
// CLI's exit status 4.
var ErrRefused = errors.New("refused")
