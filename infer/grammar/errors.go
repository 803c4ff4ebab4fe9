package grammar

import (
	"errors"
	"fmt"
)

// ErrSyntax is returned when a GBNF grammar does not parse: a malformed
// rule, literal, character class, repetition or token reference.
var ErrSyntax = errors.New("grammar syntax error")

// ErrInvalid is returned when a grammar parses but cannot be used: no
// root rule, a reference to an undefined rule, a rule defined twice, left
// recursion, a token reference the vocabulary does not hold, or a grammar
// too large once its repetitions are expanded.
var ErrInvalid = errors.New("invalid grammar")

// ErrSchema is returned when a JSON schema cannot be turned into a
// grammar: it is not valid JSON, a keyword has the wrong type, a $ref
// does not resolve, or (in strict mode) it uses a keyword this package
// does not enforce.
var ErrSchema = errors.New("invalid JSON schema")

// ErrRejected is returned by Matcher.Accept when the token is not allowed
// in the matcher's state.
var ErrRejected = errors.New("token not allowed by the grammar")

// ErrTooLarge is returned when a matcher's state grows past its bounds
// (too many distinct parser stacks), so that a pathological grammar
// cannot take unbounded memory.
var ErrTooLarge = errors.New("grammar state too large")

// SyntaxError is a GBNF parse error at a byte offset of the source.
type SyntaxError struct {
	Offset int    // byte offset into the source
	Line   int    // 1-based line
	Col    int    // 1-based column, in bytes
	Reason string // what is wrong
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%v at line %d column %d: %s", ErrSyntax, e.Line, e.Col, e.Reason)
}

// Unwrap returns ErrSyntax.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// RuleError names the grammar rule at fault.
type RuleError struct {
	Rule   string // the rule's name
	Reason string
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("%v: rule %q %s", ErrInvalid, e.Rule, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *RuleError) Unwrap() error { return ErrInvalid }

// SchemaError names the place in a JSON schema at fault, as a JSON
// pointer ("" for the root, "/properties/name/type", ...).
type SchemaError struct {
	Pointer string
	Reason  string
	Err     error // the cause, when there is one
}

func (e *SchemaError) Error() string {
	p := e.Pointer
	if p == "" {
		p = "(root)"
	}
	return fmt.Sprintf("%v at %s: %s", ErrSchema, p, e.Reason)
}

// Unwrap returns ErrSchema and the cause.
func (e *SchemaError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrSchema, e.Err}
	}
	return []error{ErrSchema}
}

// TokenError names a token the grammar does not allow.
type TokenError struct {
	Token int32
	Piece string // the token's text
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("%v: token %d (%q)", ErrRejected, e.Token, e.Piece)
}

// Unwrap returns ErrRejected.
func (e *TokenError) Unwrap() error { return ErrRejected }
