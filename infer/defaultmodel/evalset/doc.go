// Package evalset holds the held-out questions that measure muser's embedded
// default model, with the answer each one must get.
//
// # What it is for
//
// The default model (package defaultmodel) is trained on a synthetic corpus
// whose chat part teaches a few kinds of question: small-number arithmetic,
// counting, spelling, colours, animal sounds and legs, days and months, and a
// small table of capitals. Questions lists questions of those kinds whose exact
// user-message text the corpus generator never emits (it filters them out), so
// a correct answer shows the model generalised over phrasings and operands it
// saw, not that it memorised the string. Arithmetic is the exception that the
// recipe accepts: every operand pair of the small ranges appears in training
// under other phrasings, so those questions test the mapping, not novelty.
//
// ToolRequests lists ten held-out tool-calling requests: a user message, the
// one to four tools offered with it (the right one among distractors, each
// the JSON definition the corpus uses), and the one call a correct reply
// makes. The corpus teaches each function with other arguments and
// phrasings, and never emits these user messages.
//
// # Who uses it
//
//   - The corpus generator (infer/defaultmodel/recipe/corpusgen) excludes every
//     Prompt from the corpus and writes the set as JSON for the PyTorch and
//     llama.cpp evaluations of the recipe.
//   - The recipe's training script asks each ToolRequest with its tools
//     (greedy, fp32) and records the replies and grades.
//   - End-to-end tests that run the default model (through the engine or
//     through `muser serve` with temperature 0) ask each Prompt as the only
//     user message and grade the reply with Check.
//
// # Grading
//
// Check is deliberately strict about the fact and lenient about the wording:
// a numeric answer is right when the last number in the reply equals Want; a
// word answer is right when Want appears in the reply as a whole word, ignoring
// case; a text answer (a count or a spelling) is right when the reply contains
// Want verbatim after collapsing runs of white space.
//
// A tool request is right when its reply's first <tool_call>…</tool_call>
// block (ParseToolCall) names the wanted function and its arguments decode
// to the same JSON value as the wanted ones (ToolRequest.Check): key order
// and spacing do not matter, types and values do. Constrained decoding
// makes every call well-formed; the request tests which call is made.
package evalset
