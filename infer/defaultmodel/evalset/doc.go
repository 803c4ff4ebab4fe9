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
// # Who uses it
//
//   - The corpus generator (infer/defaultmodel/recipe/corpusgen) excludes every
//     Prompt from the corpus and writes the set as JSON for the PyTorch and
//     llama.cpp evaluations of the recipe.
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
package evalset
