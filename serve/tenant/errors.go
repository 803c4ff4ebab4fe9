package tenant

import (
	"errors"
	"fmt"
)

// ErrKeyFile is returned when an API key file is malformed, too large or
// too permissive; a *FileError names the file and line.
var ErrKeyFile = errors.New("bad API key file")

// ErrSecret is returned when the server secret file is missing its bytes,
// has the wrong length or a permissive mode.
var ErrSecret = errors.New("bad server secret")

// FileError names the file (and line, when one is at fault) of a problem.
type FileError struct {
	// File is the file's path.
	File string
	// Line is the 1-based line at fault; 0 when the problem is the file
	// as a whole.
	Line int
	// Msg says what is wrong.
	Msg string
	// Err is ErrKeyFile or ErrSecret.
	Err error
}

func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Unwrap returns the sentinel.
func (e *FileError) Unwrap() error { return e.Err }
