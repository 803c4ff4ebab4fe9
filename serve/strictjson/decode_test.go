package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

type part struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// content is a string or an array of parts, like OpenAI message content.
type content struct {
	Text  string
	Parts []part
}

func (c *content) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &c.Text)
	}
	if len(b) > 0 && b[0] == '[' {
		return Decode(b, &c.Parts)
	}
	return fmt.Errorf("want a string or an array of parts")
}

type message struct {
	Role    string   `json:"role"`
	Content *content `json:"content"`
}

type Embedded struct {
	User string `json:"user"`
}

type request struct {
	Embedded
	Model     string             `json:"model"`
	Messages  []message          `json:"messages"`
	MaxTokens *int               `json:"max_tokens"`
	N         int8               `json:"n"`
	Seed      uint64             `json:"seed"`
	Temp      float32            `json:"temperature"`
	Stream    bool               `json:"stream"`
	Bias      map[string]float64 `json:"logit_bias"`
	IDBias    map[int32]float64  `json:"id_bias"`
	Extra     any                `json:"extra"`
	Raw       json.RawMessage    `json:"raw"`
	Tokens    []int32            `json:"tokens"`
	Pair      [2]int             `json:"pair"`
	hidden    int
	Skipped   int `json:"-"`
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		err        error
		path       string
	}{
		{"minimal", `{"model":"m"}`, nil, ""},
		{"full", `{"model":"m","user":"u","messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"text","text":"x"}]}],
			"max_tokens":5,"n":1,"seed":18446744073709551615,"temperature":0.5,"stream":true,"logit_bias":{"1":-100},"id_bias":{"7":1},
			"extra":{"a":[1,{"b":null}]},"raw":[1,2],"tokens":[1,2,3],"pair":[1,2]}`, nil, ""},
		{"nulls", `{"model":null,"messages":null,"max_tokens":null,"messages":null}`, ErrDuplicateField, "messages"},
		{"null everywhere", `{"model":null,"messages":[{"role":null,"content":null}],"max_tokens":null}`, nil, ""},
		{"whitespace", " \n{ \"model\" : \"m\" }\n ", nil, ""},
		{"empty", ``, ErrSyntax, ""},
		{"blank", `   `, ErrSyntax, ""},
		{"malformed", `{"model":}`, ErrSyntax, ""},
		{"truncated", `{"model":"m"`, ErrSyntax, ""},
		{"trailing", `{"model":"m"} {}`, ErrSyntax, ""},
		{"trailing garbage", `{"model":"m"}x`, ErrSyntax, ""},
		{"not an object", `[1]`, ErrType, ""},
		{"null token", `{"tokens":[1,null,3]}`, ErrType, "tokens[1]"},
		{"null first token", `{"tokens":[null]}`, ErrType, "tokens[0]"},
		{"null pair element", `{"pair":[1,null]}`, ErrType, "pair[1]"},
		{"null message", `{"messages":[null]}`, ErrType, "messages[0]"},
		{"null map value", `{"logit_bias":{"1":null}}`, ErrType, `logit_bias["1"]`},
		{"null id map value", `{"id_bias":{"7":null}}`, ErrType, `id_bias["7"]`},
		{"null in any", `{"extra":[null,{"a":null}]}`, nil, ""},
		{"null in raw", `{"raw":[null]}`, nil, ""},
		{"null content pointer", `{"messages":[{"content":null}]}`, nil, ""},
		{"invalid utf-8 value", "{\"model\":\"a\xffb\"}", ErrType, "model"},
		{"invalid utf-8 key", "{\"mo\xc3\":\"m\"}", ErrType, "mo\ufffd"},
		{"invalid utf-8 nested", "{\"messages\":[{\"role\":\"user\",\"content\":\"\xed\xa0\x80\"}]}", ErrType, "messages[0].content"},
		{"invalid utf-8 in raw", "{\"raw\":[\"\xff\"]}", ErrSyntax, ""},
		{"escaped lone surrogate", `{"model":"\ud800"}`, nil, ""},
		{"valid utf-8", `{"model":"héllo ✓ 😀"}`, nil, ""},
		{"unknown top", `{"modle":"m"}`, ErrUnknownField, "modle"},
		{"unknown case", `{"Model":"m"}`, ErrUnknownField, "Model"},
		{"unknown nested", `{"messages":[{"role":"user"},{"rol":"x"}]}`, ErrUnknownField, "messages[1].rol"},
		{"unknown in custom", `{"messages":[{"content":[{"type":"text","txt":"x"}]}]}`, ErrUnknownField, "messages[0].content[0].txt"},
		{"custom wrong kind", `{"messages":[{"content":5}]}`, ErrType, "messages[0].content"},
		{"custom nested type", `{"messages":[{"content":[{"type":1}]}]}`, ErrType, "messages[0].content[0].type"},
		{"duplicate", `{"model":"a","model":"b"}`, ErrDuplicateField, "model"},
		{"duplicate map key", `{"logit_bias":{"1":1,"1":2}}`, ErrDuplicateField, `logit_bias["1"]`},
		{"string for int", `{"max_tokens":"5"}`, ErrType, "max_tokens"},
		{"float for int", `{"max_tokens":5.5}`, ErrType, "max_tokens"},
		{"exp for int", `{"max_tokens":1e3}`, ErrType, "max_tokens"},
		{"int8 overflow", `{"n":300}`, ErrType, "n"},
		{"negative uint", `{"seed":-1}`, ErrType, "seed"},
		{"float32 overflow", `{"temperature":1e39}`, ErrType, "temperature"},
		{"bool for string", `{"model":true}`, ErrType, "model"},
		{"object for array", `{"messages":{}}`, ErrType, "messages"},
		{"array for object", `{"messages":[[]]}`, ErrType, "messages[0]"},
		{"string for bool", `{"stream":"yes"}`, ErrType, "stream"},
		{"map value type", `{"logit_bias":{"1":"x"}}`, ErrType, `logit_bias["1"]`},
		{"int map key", `{"id_bias":{"x":1}}`, ErrType, `id_bias["x"]`},
		{"array element type", `{"tokens":[1,"2"]}`, ErrType, "tokens[1]"},
		{"fixed array too long", `{"pair":[1,2,3]}`, ErrType, "pair[2]"},
		{"hidden field", `{"hidden":1}`, ErrUnknownField, "hidden"},
		{"dash field", `{"Skipped":1}`, ErrUnknownField, "Skipped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r request
			err := Decode([]byte(tc.body), &r)
			if tc.err == nil {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				// The result is what encoding/json gives.
				var want request
				if err := json.Unmarshal([]byte(tc.body), &want); err != nil {
					t.Fatalf("encoding/json: %v", err)
				}
				if !reflect.DeepEqual(r, want) {
					t.Errorf("got %+v, want %+v", r, want)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v (%T), want an *Error", err, err)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("got %v, want it to wrap %v", err, tc.err)
			}
			if e.Path != tc.path {
				t.Errorf("got path %q, want %q (error %v)", e.Path, tc.path, err)
			}
		})
	}
}

func TestDecodeMessages(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"modle":1}`, `modle: unknown field "modle"`},
		{`{"max_tokens":"5"}`, `max_tokens: got a string, want an integer`},
		{`{"n":1000}`, `n: the integer 1000 is out of range`},
		{`{"model":"m"} x`, `unexpected data after the JSON value at byte 14`},
		{``, `the body is empty; want a JSON value`},
		{`{"model":`, `malformed JSON: the body ends early, at byte 9`},
	} {
		var r request
		err := Decode([]byte(tc.body), &r)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: got %v, want %q", tc.body, err, tc.want)
		}
	}
}

func TestDecodeDepth(t *testing.T) {
	deep := ""
	for range MaxDepth + 1 {
		deep += "["
	}
	for range MaxDepth + 1 {
		deep += "]"
	}
	var r request
	err := Decode([]byte(`{"extra":`+deep+`}`), &r)
	if !errors.Is(err, ErrDepth) {
		t.Fatalf("got %v, want ErrDepth", err)
	}
	var v any
	if err := Decode([]byte(deep[1:len(deep)-1]), &v); err != nil {
		t.Fatalf("depth %d: got %v, want no error", MaxDepth, err)
	}
}

func TestDecodeNeedsPointer(t *testing.T) {
	var r request
	if err := Decode([]byte(`{}`), r); err == nil {
		t.Fatal("got no error for a non-pointer, want one")
	}
}
