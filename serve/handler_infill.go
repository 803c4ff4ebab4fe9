package serve

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/muserhq/muser/infer/tokenizer"
)

// infillChunk is one entry of /infill's input_extra: another file's text
// given as context.
type infillChunk struct {
	Filename *string `json:"filename"`
	Text     string  `json:"text"`
}

// infillRequest is llama-server's POST /infill: /completion's fields and
// the code around the gap.
type infillRequest struct {
	llamaRequest
	InputPrefix *string       `json:"input_prefix"`
	InputSuffix *string       `json:"input_suffix"`
	InputExtra  []infillChunk `json:"input_extra"`
}

// infillTokens are the FIM token ids of the served model, -1 when absent.
type infillTokens struct{ pre, suf, mid, rep, sep int32 }

func (s *Server) fimTokens() infillTokens {
	t := s.model.tok
	return infillTokens{pre: t.SpecialID(tokenizer.SpecialFIMPre), suf: t.SpecialID(tokenizer.SpecialFIMSuf),
		mid: t.SpecialID(tokenizer.SpecialFIMMid), rep: t.SpecialID(tokenizer.SpecialFIMRep), sep: t.SpecialID(tokenizer.SpecialFIMSep)}
}

// handleInfill is llama-server's POST /infill (fill in the middle): it
// lays out the prompt as llama-server's does and answers as /completion.
// A model without FIM prefix, suffix and middle tokens is refused.
func (s *Server) handleInfill(w http.ResponseWriter, r *http.Request) {
	var q infillRequest
	if !s.decode(w, r, &q) {
		return
	}
	fim := s.fimTokens()
	if fim.pre < 0 || fim.suf < 0 || fim.mid < 0 {
		s.fail(w, r, badRequest("invalid_value", "input_prefix", "the served model has no fill-in-the-middle tokens "+
			"(tokenizer.ggml.fim_pre_token_id, fim_suf_token_id and fim_mid_token_id, or the older prefix/suffix/middle ids), so it cannot infill"))
		return
	}
	s.llamaCompletion(w, r, &q.llamaRequest, func() ([]int32, *apiError) { return s.infillPrompt(&q, fim) })
}

// infillPrompt lays out the tokens as llama-server does (PSM order):
//
//	[FIM_REP "myproject\n"] ([FIM_SEP filename "\n"] text)... [FIM_SEP "filename\n"]
//	[BOS] FIM_PRE prefix prompt FIM_SUF suffix FIM_MID
//
// where the repository and file separators appear only when the model has
// those tokens (without FIM_SEP each extra chunk is preceded by the text
// "\n\n--- snippet ---\n\n"), BOS only when the vocabulary adds it, and
// prefix, suffix, extra texts and prompt are tokenized without special
// tokens being parsed. Unlike llama-server, nothing is cut to fit: a
// layout longer than the context is refused.
func (s *Server) infillPrompt(q *infillRequest, fim infillTokens) ([]int32, *apiError) {
	if q.InputPrefix == nil && q.InputSuffix == nil && !isSet(q.Prompt) {
		return nil, badRequest("invalid_value", "input_prefix", "input_prefix, input_suffix and prompt are all missing")
	}
	enc := func(text, param string) ([]int32, *apiError) {
		ids, err := s.model.tok.Encode(text, tokenizer.EncodeOptions{})
		if err != nil {
			return nil, badRequest("invalid_value", param, "tokenizing %s: %v", param, err)
		}
		return ids, nil
	}
	var extra []int32
	if fim.rep >= 0 {
		ids, e := enc("myproject\n", "input_extra")
		if e != nil {
			return nil, e
		}
		extra = append(append(extra, fim.rep), ids...)
	}
	for i, c := range q.InputExtra {
		param := fmt.Sprintf("input_extra[%d]", i)
		name := "tmp"
		if c.Filename != nil {
			name = *c.Filename
		}
		if fim.sep >= 0 {
			ids, e := enc(name+"\n", param+".filename")
			if e != nil {
				return nil, e
			}
			extra = append(append(extra, fim.sep), ids...)
		} else {
			ids, e := enc("\n\n--- snippet ---\n\n", param)
			if e != nil {
				return nil, e
			}
			extra = append(extra, ids...)
		}
		ids, e := enc(c.Text, param+".text")
		if e != nil {
			return nil, e
		}
		extra = append(extra, ids...)
	}
	if fim.sep >= 0 {
		ids, e := enc("filename\n", "input_extra")
		if e != nil {
			return nil, e
		}
		extra = append(append(extra, fim.sep), ids...)
	}
	text := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	prefix, e := enc(text(q.InputPrefix), "input_prefix")
	if e != nil {
		return nil, e
	}
	suffix, e := enc(text(q.InputSuffix), "input_suffix")
	if e != nil {
		return nil, e
	}
	var prompt []int32
	if isSet(q.Prompt) {
		var p string
		if err := json.Unmarshal(q.Prompt, &p); err != nil {
			return nil, badRequest("invalid_type", "prompt", "prompt must be a string on /infill")
		}
		if prompt, e = enc(p, "prompt"); e != nil {
			return nil, e
		}
	}
	out := extra
	if s.model.tok.AddBOS() && s.model.tok.BOS() >= 0 {
		out = append(out, s.model.tok.BOS())
	}
	out = append(out, fim.pre)
	out = append(out, prefix...)
	out = append(out, prompt...)
	out = append(out, fim.suf)
	out = append(out, suffix...)
	out = append(out, fim.mid)
	return out, nil
}
