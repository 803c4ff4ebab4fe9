package template

import "strings"

// Family names a chat template family, for logs.
type Family string

// The families DetectFamily recognises.
const (
	FamilyUnknown  Family = "unknown"
	FamilyChatML   Family = "chatml"
	FamilyLlama3   Family = "llama3"
	FamilyQwen2    Family = "qwen2.5"
	FamilyQwen3    Family = "qwen3"
	FamilySmolLM2  Family = "smollm2"
	FamilyMistral  Family = "mistral"
	FamilyPhi3     Family = "phi3"
	FamilyGemma    Family = "gemma"
	FamilyDeepSeek Family = "deepseek"
)

// DetectFamily guesses a template's family from marker strings in its
// text. It is for logs and diagnostics only; rendering always follows the
// template itself.
func DetectFamily(src string) Family {
	has := func(s ...string) bool {
		for _, x := range s {
			if !strings.Contains(src, x) {
				return false
			}
		}
		return true
	}
	switch {
	case has("<|start_header_id|>"):
		return FamilyLlama3
	case has("<｜User｜>") || has("<｜Assistant｜>") || has("'User: '", "'Assistant:'"):
		return FamilyDeepSeek
	case has("<start_of_turn>"):
		return FamilyGemma
	case has("[INST]"):
		return FamilyMistral
	case has("<|user|>", "<|end|>"):
		return FamilyPhi3
	case has("<|im_start|>"):
		switch {
		case has("<think>") || has("enable_thinking"):
			return FamilyQwen3
		case has("Qwen"):
			return FamilyQwen2
		case has("SmolLM"):
			return FamilySmolLM2
		}
		return FamilyChatML
	}
	return FamilyUnknown
}
