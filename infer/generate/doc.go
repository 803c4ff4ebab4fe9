// Package generate runs one completion: it restores the longest cached
// prefix of the prompt from a PrefixStore, prefills the rest, samples and
// decodes tokens until an end-of-generation token, a stop string, the token
// limit or the context limit, streams the text, and publishes the new full
// blocks of prompt and output back to the store.
//
// # Order of a run
//
//  1. Restore (if Request.Store is set): engine.RestorePrefix imports the
//     longest verified cached prefix (never the prompt's last token). A
//     restore that fails for any reason but cancellation is reported to
//     Request.Warn and the run continues from an empty sequence: the store
//     has already refused the data (fail closed) and recorded a receipt,
//     and recomputing gives the same output.
//  2. Prefill the remaining prompt tokens in one Forward (split into
//     windows by the model's batch size), asking for the last logits.
//  3. Decode: the sampler (which has seen the prompt, for penalties)
//     picks a token; an end-of-generation token ends the run without
//     being emitted; otherwise the token is decoded with a
//     tokenizer.StreamDecoder (never a broken UTF-8 sequence), passed
//     through the stop-string matcher (which holds back a possible
//     partial match), emitted, and fed back through Forward.
//  4. Publish (if Request.Store is set and Request.NoPublish is false)
//     every full block of the tokens whose KV the sequence holds.
//
// Finish reasons are FinishStop (end-of-generation token or stop string),
// FinishLength (Request.MaxTokens reached) and FinishContext (the
// sequence's context is full).
package generate
