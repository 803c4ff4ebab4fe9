// Package grammar constrains generation to a formal language: a GBNF
// grammar (llama.cpp's notation), a JSON schema, any JSON object, or a
// forced tool call. It turns the language into a sample.Constraint that
// says, at each step, which vocabulary tokens keep the output a prefix of
// a sentence.
//
// # Pipeline
//
//	Parse(gbnf) / FromSchema(schema) / JSONObject() / ToolCall*(...)  →  *Grammar
//	Compile(*Grammar, vocabulary)                                      →  *Compiled
//	(*Compiled).NewMatcher(vocabulary)                                 →  *Matcher (a sample.Constraint)
//
// A Grammar is vocabulary-free and immutable. Compile flattens its rules,
// builds a trie of the vocabulary's token pieces (the bytes each token
// adds to the output, byte-fallback tokens included) and holds the caches
// every Matcher of it shares; compile once per grammar and vocabulary,
// start a Matcher per request.
//
// # The recognizer
//
// Rules are matched over Unicode code points by a pushdown recognizer in
// the manner of llama.cpp's: the state is a set of parser stacks, each a
// linked list of positions whose top points at a character class or a
// token reference. A code point advances every stack whose top class
// holds it, and each advanced stack is expanded (rule references pushed,
// finished rules popped) until every top is again a class or a token, or
// the stack empties, which means the output so far is a whole sentence.
// Repetitions are rewritten into right-recursive rules and a reference in
// tail position does not push a frame, so x* runs in bounded stack depth;
// left recursion is refused when the grammar is parsed. Output bytes are
// decoded as strict UTF-8: a token that ends inside a character is allowed
// when some character that could complete it is allowed, and the
// character is matched once it is whole; bytes that cannot be valid UTF-8
// are never allowed.
//
// Stack frames and states are interned, so a state is a small integer.
// Each state caches its transitions (by code point and by token) and its
// allowed-token set, so a state met again — the inside of a JSON string,
// the place after a comma — costs a copy of the set. A new state walks the
// token trie once, advancing the state byte by byte and pruning a subtree
// as soon as its prefix is refused. docs/benchmarks.md has the measured
// cost per token next to a decode step.
//
// End-of-generation tokens are allowed exactly when the output is a whole
// sentence (and no character is unfinished). Control tokens that render as
// nothing are never allowed unless the grammar names them with a token
// reference.
//
// # GBNF
//
// Parse documents the notation: rules, alternation, sequences, groups,
// * + ? {m} {m,} {m,n}, character classes with ranges and negation, ".",
// escapes, string literals, comments, and token references <[id]>,
// <name> and <"text">.
//
// # Errors and bounds
//
// Nothing read from a request panics: a bad grammar is a *SyntaxError or
// *RuleError, a bad schema a *SchemaError naming the JSON pointer at
// fault. A grammar expands to at most MaxElements elements and a
// repetition count is at most MaxRepeat; a matcher whose states grow past
// fixed bounds fails with ErrTooLarge rather than exhausting memory.
package grammar
