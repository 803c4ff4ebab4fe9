package grammar

// jsonRules is GBNF for JSON values (RFC 8259), shared by JSONObject,
// FromSchema and the tool-call grammars. Every value rule consumes the
// whitespace after it. Whitespace is nothing, one space, or one newline
// and up to 16 spaces or tabs of indentation: enough for compact and
// pretty-printed JSON, and a model cannot stall in whitespace. A
// json-char is one code point, as JSON Schema's minLength and maxLength
// count them: a character, a short escape, a \u escape of a code point
// outside the surrogates, or a \u escape of a high surrogate followed by
// one of a low surrogate. A lone surrogate escape, which decodes to no
// character, is refused.
const jsonRules = `ws ::= ( " " | "\n" [ \t]{0,16} )?
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" ws ( json-string ":" ws json-value ( "," ws json-string ":" ws json-value )* )? "}" ws
json-array ::= "[" ws ( json-value ( "," ws json-value )* )? "]" ws
json-string ::= "\"" json-char* "\"" ws
json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" json-bmp | "u" [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2} )
json-bmp ::= [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}
json-int ::= "0" | [1-9] [0-9]{0,14}
json-number ::= "-"? json-int ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )? ws
json-integer ::= "-"? json-int ws
json-boolean ::= ( "true" | "false" ) ws
json-null ::= "null" ws
`

// JSONObject returns a grammar of one JSON object (any keys and values),
// what OpenAI's response_format {"type": "json_object"} and Ollama's
// format "json" ask for.
func JSONObject() *Grammar { return MustParse("root ::= json-object\n" + jsonRules) }

// JSONValue returns a grammar of one JSON value of any type.
func JSONValue() *Grammar { return MustParse("root ::= json-value\n" + jsonRules) }
