package strictjson

import (
	"encoding/json"
	"testing"
)

// FuzzDecode checks that Decode never panics and that whatever it accepts
// encoding/json accepts too (with unknown fields disallowed).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`,
		`{"messages":[{"content":[{"type":"text","text":"x"}]}],"logit_bias":{"1":-1}}`,
		`{"extra":[[[{}]]],"raw":{"a":1},"tokens":[1,2],"pair":[1,2]}`,
		`{"model":"a","model":"b"}`, `{"n":300}`, `[`, ``, `{} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r request
		if err := Decode(body, &r); err != nil {
			return
		}
		var want request
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("Decode accepted %q, encoding/json refuses it: %v", body, err)
		}
	})
}
