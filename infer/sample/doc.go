// Package sample turns a model's logits into the next token: greedy
// decoding, temperature, top-k, top-p, min-p, repetition/presence/frequency
// penalties, logit bias and seeded random sampling, plus stop strings and
// top-n log-probabilities.
//
// # The chain
//
// Sampler.Sample applies these steps in this order, the order of
// llama.cpp's default sampler chain (common_sampler with the default
// sampler list, less the samplers muser does not implement: DRY, typical,
// XTC, top-n-sigma):
//
//  1. logit bias: logits[id] += LogitBias[id];
//  2. penalties over the last PenaltyLastN accepted tokens: a logit ≤ 0 is
//     multiplied by RepeatPenalty, a positive one divided by it; then
//     count·FrequencyPenalty + PresencePenalty (if count > 0) is
//     subtracted;
//  3. greedy: if Temperature ≤ 0, the highest logit wins (ties go to the
//     lowest token id) and the steps below are skipped;
//  4. top-k: keep the TopK highest logits (0 keeps all);
//  5. top-p: keep the smallest prefix, in descending order, whose
//     probabilities (softmax at temperature 1) sum to at least TopP;
//  6. min-p: keep tokens whose probability is at least MinP times the
//     highest one;
//  7. temperature: divide the surviving logits by Temperature;
//  8. draw: softmax and pick by a uniform draw from the seeded generator.
//
// Candidates are always ordered by logit, descending, ties by ascending
// token id, so every step is a function of its input alone.
//
// # Constraints
//
// A Constraint (a grammar, a JSON schema, a forced tool call) says which
// tokens may come next as a TokenSet. SampleAllowed applies it before step
// 1: every token outside the set counts as -Inf, so it is dropped with the
// banned tokens and the chain runs on the rest unchanged. Greedy and
// seeded sampling therefore stay functions of their inputs (logits, set,
// seed, accepted tokens), alone or batched. Sample is SampleAllowed with
// no set. The caller drives the Constraint: Allowed before the draw,
// Accept after it; Clone lets a speculative decoder try draft tokens.
//
// # Determinism
//
// The same Params (including Seed), logits and accepted tokens give the
// same token on every run and every platform. The generator is ChaCha8
// (math/rand/v2) keyed by the 64-bit seed written little-endian into the
// first 8 bytes of a zero 32-byte key; the draw is Float64 of that
// generator. Probabilities are computed in float64 with this package's own
// exponential (range reduction and a fixed-degree polynomial with every
// operation rounded explicitly), not math.Exp, whose amd64 assembly
// differs with the CPU's FMA support and whose Go code may be fused
// differently on other architectures.
//
// # Log-probabilities
//
// Logprobs reports the log-softmax of the raw logits (temperature 1,
// before bias, penalties and truncation), as OpenAI's logprobs do: the
// model's own distribution, not the sampler's.
//
// # Stop strings
//
// A Stop matcher works on decoded text. Write returns only text that can
// no longer become part of a stop string: the longest tail of the pending
// text that is a prefix of some stop string is held back until later text
// decides it. Generation stops at the first Write after which the text
// holds a stop string; the cut is the earliest start among the stop
// strings then present, the text before it is returned and the rest is
// dropped.
package sample
