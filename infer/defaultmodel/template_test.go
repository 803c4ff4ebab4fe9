package defaultmodel

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/muserhq/muser/infer/template"
)

// chatMLTemplate is the template of the model file committed before the
// tool-calling retrain: plain ChatML. ChatTemplate must render every
// conversation without tools exactly as it does.
const chatMLTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

func mustParse(t *testing.T, src string) *template.Template {
	t.Helper()
	tm, err := template.Parse(src)
	if err != nil {
		t.Fatalf("parsing the template: %v", err)
	}
	return tm
}

// TestChatTemplateWithoutToolsIsChatML renders random conversations
// without tools through both templates and compares the bytes.
func TestChatTemplateWithoutToolsIsChatML(t *testing.T) {
	cur, old := mustParse(t, ChatTemplate), mustParse(t, chatMLTemplate)
	if chatMLTemplate != template.ChatMLSource {
		t.Fatal("the previous template is no longer template.ChatMLSource")
	}
	contents := []string{"", "Hello!", "What is 3 plus 4?", " lead and trail ", "two\nlines\n", "<|im_start|>", "{{ not jinja }}", "{% raw %}", "caf\u00e9 \U0001F600", "\"quoted\" 'single'", "\\n"}
	roles := []string{"system", "user", "assistant", "user", "assistant", "narrator"}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 400; i++ {
		n := rng.IntN(7)
		msgs := make([]template.Message, n)
		for j := range msgs {
			msgs[j] = template.Message{Role: roles[rng.IntN(len(roles))], Content: contents[rng.IntN(len(contents))]}
		}
		var tools []any
		if i%3 == 1 {
			tools = []any{} // an empty list is no tools
		}
		ctx := template.Context{Messages: msgs, Tools: tools, AddGenerationPrompt: i%2 == 0, BOSToken: "<s>", EOSToken: "<|im_end|>"}
		want, err := old.Render(ctx)
		if err != nil {
			t.Fatalf("case %d: ChatML: %v", i, err)
		}
		got, err := cur.Render(ctx)
		if err != nil {
			t.Fatalf("case %d: ChatTemplate: %v", i, err)
		}
		if got != want {
			t.Fatalf("case %d: ChatTemplate rendered\n%q\nwant (ChatML)\n%q", i, got, want)
		}
	}
}

const weatherTool = `{"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}`
const timerTool = `{"type": "function", "function": {"name": "set_timer", "description": "Set a timer.", "parameters": {"type": "object", "properties": {"minutes": {"type": "integer"}}, "required": ["minutes"]}}}`

const toolsHeader = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
const toolsFooter = "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"

func TestChatTemplateTools(t *testing.T) {
	tm := mustParse(t, ChatTemplate)
	tools := []any{json.RawMessage(weatherTool), json.RawMessage(timerTool)}
	call := func(name, args string) template.ToolCall {
		return template.ToolCall{ID: "call_1", Name: name, Arguments: json.RawMessage(args)}
	}
	tests := []struct {
		name string
		ctx  template.Context
		want string
	}{
		{
			name: "tools, no system message",
			ctx: template.Context{Tools: tools, AddGenerationPrompt: true, Messages: []template.Message{
				{Role: "user", Content: "What is the weather in Paris?"},
			}},
			want: "<|im_start|>system\n" + toolsHeader + weatherTool + "\n" + timerTool + toolsFooter +
				"<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n<|im_start|>assistant\n",
		},
		{
			name: "tools after a system message, call, response, answer",
			ctx: template.Context{Tools: tools[:1], Messages: []template.Message{
				{Role: "system", Content: "You are a helpful assistant."},
				{Role: "user", Content: "Weather in Rome?"},
				{Role: "assistant", NullContent: true, ToolCalls: []template.ToolCall{call("get_weather", `{"city": "Rome"}`)}},
				{Role: "tool", ToolCallID: "call_1", Content: `{"temperature": 21, "sky": "cloudy"}`},
				{Role: "assistant", Content: "It is 21 degrees and cloudy in Rome."},
			}},
			want: "<|im_start|>system\nYou are a helpful assistant.\n\n" + toolsHeader + weatherTool + toolsFooter +
				"<|im_start|>user\nWeather in Rome?<|im_end|>\n" +
				"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\n{\"temperature\": 21, \"sky\": \"cloudy\"}\n</tool_response><|im_end|>\n" +
				"<|im_start|>assistant\nIt is 21 degrees and cloudy in Rome.<|im_end|>\n",
		},
		{
			name: "two calls with content, two tool messages grouped, string arguments",
			ctx: template.Context{Tools: tools, AddGenerationPrompt: true, Messages: []template.Message{
				{Role: "user", Content: "Paris and Rome?"},
				{Role: "assistant", Content: "Let me look.", ToolCalls: []template.ToolCall{
					call("get_weather", `{"city": "Paris"}`),
					{Name: "get_weather", Arguments: `{"city": "Rome"}`},
				}},
				{Role: "tool", Content: "sunny"},
				{Role: "tool", Content: "rainy"},
			}},
			want: "<|im_start|>system\n" + toolsHeader + weatherTool + "\n" + timerTool + toolsFooter +
				"<|im_start|>user\nParis and Rome?<|im_end|>\n" +
				"<|im_start|>assistant\nLet me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>" +
				"\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrainy\n</tool_response><|im_end|>\n" +
				"<|im_start|>assistant\n",
		},
		{
			name: "tool messages without tools, a later system message",
			ctx: template.Context{Messages: []template.Message{
				{Role: "user", Content: "Hi"},
				{Role: "tool", Content: "x"},
				{Role: "system", Content: "Be brief."},
			}},
			want: "<|im_start|>user\nHi<|im_end|>\n<|im_start|>user\n<tool_response>\nx\n</tool_response><|im_end|>\n<|im_start|>system\nBe brief.<|im_end|>\n",
		},
		{
			name: "map tools sort their keys as tojson does",
			ctx:  template.Context{Tools: []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}}},
			want: "<|im_start|>system\n" + toolsHeader + `{"function": {"name": "f"}, "type": "function"}` + toolsFooter,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tm.Render(tc.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s\n(first difference at byte %d)", got, tc.want, firstDiff(got, tc.want))
			}
		})
	}
}

func firstDiff(a, b string) int {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestEmbeddedTemplate checks that the embedded file's
// tokenizer.chat_template is ChatTemplate.
func TestEmbeddedTemplate(t *testing.T) {
	f, err := File()
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Meta.String("tokenizer.chat_template")
	if err != nil {
		t.Fatal(err)
	}
	if got != ChatTemplate {
		t.Fatalf("tokenizer.chat_template = %q, want ChatTemplate %q", got, ChatTemplate)
	}
}
