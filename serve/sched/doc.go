// Package sched runs generation requests on one model with continuous
// batching: a fixed set of slots, a bounded queue, and one goroutine that,
// at each step, gathers every active slot's work into a single
// engine.Model.Forward. It is muser's one generation driver: muser serve
// runs it with --parallel slots, muser run with one. It knows the engine
// front only, never a backend's kernels.
//
// # Slots and steps
//
// A slot is an engine.Sequence with a KV cache of Config.Ctx tokens and
// the request it serves. A request waits in the queue (at most
// Config.MaxQueue; Submit returns ErrQueueFull beyond) until a slot is
// idle. Each step then holds, for every slot that is decoding, its last
// sampled token, and for slots still computing their prompt a chunk of it
// (at most PrefillChunk tokens per slot and StepTokens over all slots, in
// rotating order), so a long prompt delays the others' next token by a
// bounded amount. After the step each slot with logits samples its next
// token with its own sampler and seed (the prompt's tokens count for the
// repetition penalties, as in llama.cpp's server). The engine's kernels are
// batch-invariant (infer/engine, "Exactness"), so a request's tokens are
// the same whether it ran alone or beside others, in whatever chunks.
//
// # Prefix reuse
//
// When a request gets a slot, every full block of its prompt that the
// store holds under (identity, salt) is restored, verified, in a
// goroutine of its own, so other slots keep decoding meanwhile, by the
// engine's one prefix-restore rule (engine.Model.RestorePrefix: if the
// blocks cover the whole prompt its last token is dropped again, its
// logits must be computed), and only the rest of the prompt is computed.
// A refused restore (bad digest, identity mismatch: the store records a
// receipt) or a failed one is a miss: the prompt is computed in full and
// the refusal is reported to the Observer. With Config.SlotReuse, an idle
// slot that last served the same salt and still holds more of the prompt
// than the store does is reused instead (its KV truncated to the common
// prefix). Result.CachedTokens counts the tokens not computed, and
// Result.CacheSource says where they came from.
//
// # Publishing
//
// When a request ends (finished, stopped, or cancelled), its slot's full
// blocks of prompt and output that the store lacks are copied out by a
// goroutine (the slot shows "publishing" meanwhile, usually for a few
// milliseconds) and queued for the publisher goroutine, which writes them
// with store.PublishPrefix: the token stream never waits for a disk
// write. A full publish queue drops the job (and reports it) rather than
// block. With Config.StoreMaxBytes the publisher runs gc when the store
// grows past its budget. Close flushes the queue. Config.OnPublish is
// called after each publish (the hook for replication), and
// Config.RemotePrefill before each restore (the hook for disaggregated
// prefill); Config.Restore, when set, restores in the store's place (the
// hook for the fleet tier's read-through); a PrefillOnly request computes and publishes a prompt's KV and
// returns the pack (the producer side).
//
// # Speculative decoding
//
// With Config.Drafter, each decode step of a slot feeds its last sampled
// token and the drafter's proposal d1..dk (OutputAll), and Scheduler.verify
// replays plain decoding over the rows: row j, the logits after last,
// d1..dj, is bit-identical to plain decoding's by batch invariance, so it
// is sampled with the request's sampler, accepted, emitted and checked
// (stop strings, end of generation, limits) as a plain step would, with
// the sequence counted at plain decoding's length; the replay goes on to
// row j+1 only while the sampled token equals d(j+1). The sampler is
// never called for a position plain decoding would not reach, and the
// sequence is cut back to plain decoding's tokens before anything reads
// it (including a publish), so output, logprobs, finish reasons and packs
// are the same as without a drafter. The draft length adapts per slot, at
// most Config.DraftMax (draft_cost.go): from the slot's measured per-token
// acceptance α, a step of k drafts yields 1 + α + … + α^k tokens on
// average, and costs a target step of k+1 rows plus k draft tokens (one
// Draft call whatever k for a FixedCostDrafter, a block drafter), both
// measured as the scheduler runs (the wall time of decode-only steps by
// their rows, and of Draft calls per token); the slot drafts the k that
// makes the most tokens per second, or nothing while no k beats a plain
// step; now and then it takes the other choice (two drafts in a row
// every probeEvery steps while the lane does not pay, a plain step while
// it does), to measure again.
// Config.DraftIgnoreCost adapts to the acceptance alone (draftLen). The
// scheduler keeps each slot's draft history and extends it by the tokens
// fed since its last draft (DraftRequest.Stable says how many are
// unchanged), so a step's drafting does not cost time in the context's
// length.
// LookupDrafter (prompt lookup) and ModelDrafter (a draft model with the
// same tokenizer, CheckDraftTokenizer) are lanes of this package, the
// block drafter's lane (a HiddenDrafter) is serve/draftlane's, which also
// builds what muser's flags name; ChainDrafter asks several lanes in order
// (each slot takes the first proposal), and Scheduler.DraftStats counts
// their work.
//
// A HiddenDrafter that wants hidden states (a block drafter, conditioned
// on the target) gets, in DraftRequest.Hidden, the target's final-normed
// hidden state after the last token it computed, History[len-2]; History's
// last token is the one sampled from that position's logits, not yet fed.
// For it, every step of a slot asks the engine for hidden states where it
// asks for logits: the prompt's last chunk and a plain decode step the
// last token's (engine.OutputLast), a verification step every row's
// (OutputAll). The slot keeps them in a buffer reused from step to step
// (draft_hidden.go); after verification the row whose logits sampled the
// new last token is the one handed out (row j, after last, d1..dj), and a
// request with N > 1 choices keeps the state after its prompt, from which
// each choice starts again. The state is bit-identical to what a Forward of
// History[:len-1] on a fresh sequence returns for its last token: the
// kernels are batch-invariant, and the last prompt token is always
// computed, after a prefix restore or a slot reuse too. A decoding slot
// always has it. The logits, and so the output, are the same either way;
// with a drafter that wants none, no step asks for hidden states. New
// refuses a HiddenDrafter on a model whose device returns no hidden states
// (CheckDraftHidden: a *DraftHiddenError naming the lane and the device);
// a ChainDrafter wants them when one of its lanes does, and passes them to
// the lanes that want them.
//
// # Embeddings
//
// A request with Request.Hidden set is an embeddings request: a prefill
// in a slot, chunk by chunk beside the other slots' work, that collects
// the final-normed hidden states of its prompt (the last token's or every
// token's) into Result.Hidden and ends without sampling. Its blocks are
// published like any prefill's. One that wants every token's state never
// restores a prefix nor reuses a slot's KV (restored tokens have no
// states); one that wants the last token's does both as usual.
//
// # Slot operations
//
// WithSlot hands an idle slot's sequence, and the salt of the KV it
// holds, to an operation (llama-server's slot save, restore and erase) in
// a goroutine of its own; the slot is in state "maintenance" meanwhile
// and no request is admitted to it. A slot serving a request is refused
// at once (ErrSlotBusy), never waited for; one whose finished request's
// blocks are being copied out for the publisher is taken as soon as they
// are.
//
// # Several choices
//
// A request with N > 1 (at most MaxChoices) asks for N completions of one
// prompt. Its prompt is computed once: the logits after it are kept, and
// the choices run one after the other in the same slot, each from the
// prompt's KV (the slot is truncated back to the prompt between them) with
// its own sampler seeded with the request's seed plus the choice's index
// (choice 0 is what the request with N = 1 generates; choice i what it
// generates with seed+i, bit for bit) and its own copy of the Constraint.
// Event.Choice names each event's choice, in index order; Result.Choices
// holds each choice's outcome. A cancel or an error ends every choice.
//
// # Cancellation
//
// A task's context ends when the client goes away or Task.Cancel is
// called: a queued task leaves the queue, a running one frees its slot at
// the next step (its computed blocks are still published). Close refuses
// new requests, lets running and queued ones finish until its context
// ends, then cancels the rest.
package sched
