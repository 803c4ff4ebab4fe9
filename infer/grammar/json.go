package grammar

// jsonRules is GBNF for JSON values (RFC 8259), shared by JSONObject,
// FromSchema and the tool-call grammars. Every value rule consumes the
// whitespace after it; whitespace runs are bounded so a model cannot
// stall in them forever.
const jsonRules = `ws ::= [ \t\n]{0,20}
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" ws ( json-string ":" ws json-value ( "," ws json-string ":" ws json-value )* )? "}" ws
json-array ::= "[" ws ( json-value ( "," ws json-value )* )? "]" ws
json-string ::= "\"" json-char* "\"" ws
json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json-int ::= "0" | [1-9] [0-9]{0,15}
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
