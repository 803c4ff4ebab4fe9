package evalset

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseToolCall(t *testing.T) {
	tests := []struct {
		reply    string
		wantName string
		wantArgs string
		wantErr  error
	}{
		{"<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>", "add", `{"a": 1, "b": 2}`, nil},
		{"Sure. <tool_call>{\"arguments\":{},\"name\":\"f\"}</tool_call> and <tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>", "f", `{}`, nil},
		{"no call here", "", "", ErrNoToolCall},
		{"<tool_call>\n{\"name\": \"add\", \"arguments\": {}}", "", "", ErrNoToolCall},
		{"<tool_call>\nnot json\n</tool_call>", "", "", ErrToolCallJSON},
		{"<tool_call>{\"arguments\": {}}</tool_call>", "", "", ErrToolCallJSON},
		{"<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>", "", "", ErrToolCallJSON},
		{"<tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}</tool_call>", "", "", ErrToolCallJSON},
		{"<tool_call>{\"name\": \"f\"}</tool_call>", "", "", ErrToolCallJSON},
		{"<tool_call>{\"name\": \"f\", \"arguments\": {}} {}</tool_call>", "", "", ErrToolCallJSON},
		{"<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": </tool_call>", "", "", ErrToolCallJSON},
	}
	for _, tc := range tests {
		t.Run(tc.reply, func(t *testing.T) {
			c, err := ParseToolCall(tc.reply)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ParseToolCall error = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Name != tc.wantName || string(c.Arguments) != tc.wantArgs {
				t.Fatalf("got %q %s, want %q %s", c.Name, c.Arguments, tc.wantName, tc.wantArgs)
			}
		})
	}
}

func TestToolRequestCheck(t *testing.T) {
	q := ToolRequest{Name: "convert_units", Arguments: `{"value": 3, "from_unit": "kilometres", "to_unit": "metres"}`}
	call := func(s string) string { return "<tool_call>\n" + s + "\n</tool_call>" }
	tests := []struct {
		reply string
		want  bool
	}{
		{call(`{"name": "convert_units", "arguments": {"value": 3, "from_unit": "kilometres", "to_unit": "metres"}}`), true},
		{call(`{"name":"convert_units","arguments":{"to_unit":"metres","value":3.0,"from_unit":"kilometres"}}`), true},
		{call(`{"name": "convert_units", "arguments": {"value": "3", "from_unit": "kilometres", "to_unit": "metres"}}`), false},
		{call(`{"name": "convert_units", "arguments": {"value": 3, "from_unit": "kilometres"}}`), false},
		{call(`{"name": "convert_units", "arguments": {"value": 3, "from_unit": "kilometres", "to_unit": "metres", "x": 1}}`), false},
		{call(`{"name": "convert_unit", "arguments": {"value": 3, "from_unit": "kilometres", "to_unit": "metres"}}`), false},
		{call(`{"name": "convert_units", "arguments": {"value": 3, "from_unit": "Kilometres", "to_unit": "metres"}}`), false},
		{"3 kilometres is 3000 metres.", false},
		{"", false},
	}
	for _, tc := range tests {
		t.Run(tc.reply, func(t *testing.T) {
			if got := q.Check(tc.reply); got != tc.want {
				t.Fatalf("Check(%q) = %v, want %v", tc.reply, got, tc.want)
			}
		})
	}
}

func TestToolRequestsAreWellFormed(t *testing.T) {
	qs := ToolRequests()
	if len(qs) != 10 {
		t.Fatalf("got %d tool requests, want 10", len(qs))
	}
	names := map[string]bool{}
	for _, q := range qs {
		t.Run(q.Prompt, func(t *testing.T) {
			if Prompts()[q.Prompt] {
				t.Fatalf("prompt %q is also a question of Questions", q.Prompt)
			}
			if strings.ContainsAny(q.Prompt, "<>\n") {
				t.Fatalf("prompt %q contains markup or a newline", q.Prompt)
			}
			offered := 0
			for i, tl := range q.Tools {
				var d struct {
					Type     string `json:"type"`
					Function struct {
						Name        string         `json:"name"`
						Description string         `json:"description"`
						Parameters  map[string]any `json:"parameters"`
					} `json:"function"`
				}
				if err := json.Unmarshal([]byte(tl), &d); err != nil {
					t.Fatalf("tool %d: %v", i, err)
				}
				if d.Type != "function" || d.Function.Name == "" || d.Function.Description == "" || d.Function.Parameters["type"] != "object" {
					t.Fatalf("tool %d is not a complete function definition: %s", i, tl)
				}
				if d.Function.Name == q.Name {
					offered++
				}
			}
			if offered != 1 {
				t.Fatalf("%s is offered %d times, want once", q.Name, offered)
			}
			good := "<tool_call>\n{\"name\": \"" + q.Name + "\", \"arguments\": " + q.Arguments + "}\n</tool_call>"
			if !q.Check(good) {
				t.Fatalf("Check(%q) = false for the wanted call", good)
			}
			if names[q.Name] {
				t.Fatalf("two requests call %s", q.Name)
			}
			names[q.Name] = true
		})
	}
	if len(ToolPrompts()) != len(qs) {
		t.Fatalf("ToolPrompts() has %d entries, want %d", len(ToolPrompts()), len(qs))
	}
	qs[0].Tools[0] = "changed"
	if ToolRequests()[0].Tools[0] == "changed" {
		t.Fatal("ToolRequests returned the package's own slices")
	}
}
