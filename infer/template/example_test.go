package template_test

import (
	"errors"
	"fmt"

	"github.com/muserhq/muser/infer/template"
)

func Example() {
	t, err := template.Parse(`{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}
{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}`)
	if err != nil {
		panic(err)
	}
	prompt, err := t.Render(template.Context{
		Messages:            []template.Message{{Role: "system", Content: "Be brief. "}, {Role: "user", Content: "Hi!"}},
		AddGenerationPrompt: true,
	})
	fmt.Printf("%q %v\n", prompt, err)
	// Output: "<|system|>Be brief.\n<|user|>Hi!\n<|assistant|>" <nil>
}

func ExampleChatML() {
	prompt, _ := template.ChatML().Render(template.Context{
		Messages:            []template.Message{{Role: "user", Content: "Hello!"}},
		AddGenerationPrompt: true,
	})
	fmt.Printf("%q\n", prompt)
	// Output: "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n"
}

func ExampleParse_unsupported() {
	_, err := template.Parse("line one\n{% include 'header.jinja' %}")
	var e *template.Error
	if errors.As(err, &e) && errors.Is(err, template.ErrUnsupported) {
		fmt.Println(e.Pos, e.Construct)
	}
	fmt.Println(err)
	// Output:
	// 2:4 tag 'include'
	// template 2:4: unsupported template construct: tag 'include': templates cannot load other templates
}
