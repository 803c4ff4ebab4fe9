package mtls

import "fmt"

// MaxNameLen is the longest node name, the length limit of a DNS label.
const MaxNameLen = 63

// ValidateName reports whether name is a valid node name: a DNS label of
// 1 to 63 characters from a-z, 0-9 and '-', not starting or ending with '-'.
// The error wraps ErrBadName and quotes the name.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrBadName)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: %q is %d bytes, the limit is %d", ErrBadName, name, len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1:
		default:
			return fmt.Errorf("%w: %q: byte %d (%q) is not allowed; use a-z, 0-9 and inner '-'", ErrBadName, name, i, c)
		}
	}
	return nil
}
