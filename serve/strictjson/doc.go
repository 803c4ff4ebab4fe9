// Package strictjson decodes a JSON request body into a Go value and
// refuses anything the value's type does not describe, naming the place
// at fault with a path such as messages[1].content[0].type.
//
// # Why not json.Decoder.DisallowUnknownFields alone
//
// encoding/json's unknown-field error names the key but not where it is
// ("json: unknown field "x""), its type errors drop array indices
// ("messages.n"), it matches keys case-insensitively, accepts duplicate
// keys (the last wins) and says nothing of data after the value. A client
// that sent "temprature" or "Temperature" deserves to be told so, at the
// right place, rather than to have it ignored.
//
// # What Decode checks
//
// Before anything is assigned, the body is walked once with a token
// reader against the target's type:
//
//   - the body is exactly one JSON value (ErrSyntax on malformed JSON, on
//     an empty body and on data after the value);
//   - every object key of a struct is the exact json name of one of its
//     fields (ErrUnknownField; case counts) and appears once
//     (ErrDuplicateField);
//   - every value has the kind its field needs: string, bool, number,
//     array, object (ErrType); integers must be integral and fit their Go
//     type; null for a field leaves it unset, but null as an array
//     element or a map value is refused unless the Go type can hold it (a
//     pointer, an interface, json.RawMessage, a type with UnmarshalJSON),
//     since encoding/json would make it a zero (ErrType);
//   - the body is UTF-8: a string or key holding an invalid byte is
//     refused with its path (ErrType), any other invalid byte is ErrSyntax
//     (encoding/json would silently replace them with U+FFFD; escaped lone
//     surrogates such as "\ud800" are valid JSON and become U+FFFD);
//   - maps take any keys; interfaces (any) and json.RawMessage take any
//     value; a type with its own UnmarshalJSON is handed the raw bytes of
//     its value (checked for UTF-8 first), and an error it returns is
//     reported at its path (an *Error it returns keeps its own path below
//     that one);
//   - nesting is bounded (MaxDepth).
//
// Only then is the body decoded with encoding/json, so the result is what
// encoding/json would have produced. Every error is an *Error carrying the
// path, which wraps one of the sentinels above.
package strictjson
