package serve

import (
	"errors"
	"fmt"
	"strings"

	"github.com/muserhq/muser/infer/template"
	"github.com/muserhq/muser/infer/tokenizer"
)

// renderChat renders messages with the model's chat template (ChatML when
// it has none) and an assistant generation prompt, and tokenizes the
// result as llama.cpp's server does: special tokens parsed, BOS added
// unless the rendered text already starts with it.
func (s *Server) renderChat(msgs []template.Message, param string) ([]int32, *apiError) {
	return s.renderChatTools(msgs, nil, param)
}

// renderChatTools is renderChat with tool definitions: the template gets
// them as its tools variable (see toolMessages for templates that do not
// read them).
func (s *Server) renderChatTools(msgs []template.Message, tools []toolDef, param string) ([]int32, *apiError) {
	text, e := s.chatText(msgs, tools, param)
	if e != nil {
		return nil, e
	}
	addBOS := !(s.model.bos != "" && strings.HasPrefix(text, s.model.bos))
	return s.tokenize(text, addBOS, true, param)
}

// chatText is the text renderChatTools tokenizes: the model's chat
// template (ChatML when it has none) over msgs, with tools, and the
// assistant's generation prompt. /apply-template answers it.
func (s *Server) chatText(msgs []template.Message, tools []toolDef, param string) (string, *apiError) {
	src := s.model.tmpl.Source()
	if tools != nil || hasToolCalls(msgs) {
		msgs = toolMessages(src, detectToolFormat(src), msgs, tools)
	}
	text, err := s.model.tmpl.Render(template.Context{
		Messages:            msgs,
		Tools:               templateTools(tools),
		AddGenerationPrompt: true,
		BOSToken:            s.model.bos,
		EOSToken:            s.model.eos,
	})
	if err != nil {
		var te *template.Error
		if errors.As(err, &te) && errors.Is(err, template.ErrRaised) {
			return "", badRequest("invalid_value", param, "the model's chat template refused the messages: %s", te.Msg)
		}
		return "", badRequest("invalid_value", param, "rendering the chat template: %v", err)
	}
	return text, nil
}

// tokenize encodes text; addSpecial adds BOS/EOS as the vocabulary says.
func (s *Server) tokenize(text string, addSpecial, parseSpecial bool, param string) ([]int32, *apiError) {
	ids, err := s.model.tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: addSpecial, ParseSpecial: parseSpecial})
	if err != nil {
		return nil, badRequest("invalid_value", param, "tokenizing %s: %v", param, err)
	}
	if len(ids) == 0 {
		return nil, badRequest("invalid_value", param, "%s is empty", param)
	}
	return ids, nil
}

// checkTokens refuses token ids outside the vocabulary.
func (s *Server) checkTokens(ids []int32, param string) *apiError {
	n := s.model.tok.VocabSize()
	for i, t := range ids {
		if t < 0 || int(t) >= n {
			return badRequest("invalid_value", fmt.Sprintf("%s[%d]", param, i), "token %d is outside the vocabulary (0 to %d)", t, n-1)
		}
	}
	return nil
}
