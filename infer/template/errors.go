package template

import (
	"errors"
	"fmt"
)

var (
	// ErrSyntax is returned when a template's text is not valid Jinja: an
	// unclosed tag, an unexpected token, a missing end tag.
	ErrSyntax = errors.New("template syntax error")

	// ErrUnsupported is returned when a template uses a Jinja construct
	// (a tag, filter, test, method, or a feature such as {% include %})
	// this package does not implement. The error names the construct and
	// its position; nothing is rendered, never a best-effort result.
	ErrUnsupported = errors.New("unsupported template construct")

	// ErrRender is returned when rendering fails the way Jinja2 would
	// raise at run time: a type error ("can only concatenate str"), an
	// undefined value used in an operation, a sandbox violation, a
	// division by zero.
	ErrRender = errors.New("template render error")

	// ErrRaised is returned when the template itself calls
	// raise_exception(message); the Error's Msg is the template's message.
	ErrRaised = errors.New("template raised an exception")

	// ErrLimit is returned when rendering exceeds a bound that guards
	// against runaway templates: output size, loop iterations, call depth.
	ErrLimit = errors.New("template limit exceeded")

	// ErrInput is returned when a Context value cannot be given to a
	// template: a Go type with no Python counterpart, an Extra key that
	// collides with a reserved variable, malformed JSON in a
	// json.RawMessage.
	ErrInput = errors.New("invalid template input")
)

// Pos is a position in a template's text: 1-based line and column, the
// column counted in code points. Lines are those of the text after
// newline normalisation ("\r\n" and "\r" count as one line break).
type Pos struct {
	Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Error is a problem at one place in a template. Kind is one of the
// package's sentinel errors and is what errors.Is matches.
type Error struct {
	// Kind is ErrSyntax, ErrUnsupported, ErrRender, ErrRaised, ErrLimit
	// or ErrInput.
	Kind error
	// Pos is where in the template the problem is; zero when it is not
	// tied to a place (for example ErrInput).
	Pos Pos
	// Construct names the unsupported construct for ErrUnsupported, for
	// example "tag 'include'" or "filter 'groupby'".
	Construct string
	// Msg says what went wrong.
	Msg string
	// Err is an underlying cause, if any.
	Err error
}

func (e *Error) Error() string {
	s := "template"
	if e.Pos.Line > 0 {
		s += " " + e.Pos.String()
	}
	s += ": " + e.Kind.Error()
	if e.Construct != "" {
		s += ": " + e.Construct
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the sentinel Kind and the underlying cause, so that
// errors.Is works with both.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}
