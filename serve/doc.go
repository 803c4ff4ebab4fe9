// Package serve is muser's HTTP server: OpenAI-, llama.cpp- and
// Ollama-compatible routes over one model, a continuous-batching
// scheduler (serve/sched) and the durable prefix cache (store).
//
// # Construction
//
// New loads the model (Options.ModelPath, or an already parsed
// Options.Model such as the embedded default model), opens the store under
// Options.Home (or uses Options.Store), loads the API keys and the server
// secret, and starts the scheduler. Serve serves on a listener until its
// context ends and then shuts down gracefully; Close releases everything
// when Serve is not used. The Server keeps the model, store and scheduler
// as fields, and Options carries the scheduler's hooks (OnPublish for
// replication, RemotePrefill for a prefill producer), so the replication
// flags of `muser serve` wire in without changing the routes;
// Server.Prefill is the producer side (it satisfies net/repl.Prefiller).
//
// # Routes
//
// One handler per file (handler_*.go), registered with Go 1.22 ServeMux
// patterns in routes.go:
//
//	OpenAI     POST /v1/chat/completions, POST /v1/completions,
//	           GET /v1/models, GET /v1/models/{id}, POST /v1/embeddings,
//	           POST /v1/responses, GET and DELETE /v1/responses/{id}
//	llama.cpp  POST /completion, POST /tokenize, POST /detokenize,
//	           GET /props, GET /health, GET /slots, POST /slots/{id},
//	           POST /embedding, POST /embeddings, POST /apply-template,
//	           POST /infill
//	Ollama     POST /api/generate, POST /api/chat, GET /api/tags,
//	           POST /api/show, GET /api/version, POST /api/embed,
//	           POST /api/embeddings, GET /api/ps
//	           GET /metrics (Prometheus)
//	admin      /admin/v1/... (handler_admin.go; docs/serve.md)
//	dashboard  GET /, HEAD / (the page for a browser, Ollama's probe
//	           text "Ollama is running" for other clients),
//	           GET /dashboard/... (serve/dashboard)
//
// The dashboard's page and `/` need no key; its state
// (/dashboard/api/state) shows every tenant's packs, so it follows the
// admin endpoint's access rule. A chat or text completion (OpenAI) with
// the muser extension "timings": true carries a timings object (queue, remote
// prefill, restore, prefill, time to first token, decode rate, and where
// the prefill ran).
//
// Generation routes stream with SSE (OpenAI, llama.cpp) or NDJSON
// (Ollama) when asked. Every route reports the prompt tokens served from
// the cache: usage.prompt_tokens_details.cached_tokens (OpenAI),
// tokens_cached and timings.cache_n (llama.cpp), cached_tokens beside
// Ollama's counters and in the access log.
//
// # Tools, choices and stored responses
//
// tools.go reads tool definitions, tool_choice and the history's calls;
// toolcall.go detects the chat template's tool-call format (Hermes,
// Llama 3 JSON, Mistral) and parses replies into calls, whole or streamed;
// toolgrammar.go forces a call (tool_choice required or named) with an
// infer/grammar constraint. n > 1 runs the choices from one prefill
// (serve/sched, "Several choices"). handler_responses.go serves the
// Responses API; its stored responses live in serve/respstore, under the
// home, per tenant. docs/serve.md states the rules.
//
// # Strict input
//
// Bodies are read through http.MaxBytesReader (Options.MaxBodyBytes; 413
// beyond) and decoded with serve/strictjson: malformed JSON, an unknown
// field (named with its path, e.g. messages[1].contnet), a value of the
// wrong type and trailing data are 400s. Fields the APIs define but muser
// does not support yet (images, ...) are 400s with code
// unsupported_field naming them;
// fields without effect on the output (user, store, metadata, keep_alive,
// hardware options) are accepted. A prompt that does not fit a slot's
// context is a 400 (code context_length_exceeded) giving both numbers.
// Structured output (response_format, /completion's grammar and
// json_schema, Ollama's format) compiles to an infer/grammar constraint
// that the scheduler applies at every sampled token (structured.go); an
// invalid schema or a grammar that does not parse is a 400 naming the
// field.
// Errors use each family's shape, with the request ID:
//
//	OpenAI     {"error":{"message","type","param","code","request_id"}}
//	llama.cpp  {"error":{"code","message","type","request_id"}}
//	Ollama     {"error":"...","request_id":"..."}
//
// # Middleware
//
// Outermost first: a request ID (a valid X-Request-Id is kept, else one
// is made; it is echoed in the X-Request-Id header, every log line and
// every error body), recovery (a panic is logged with its stack and
// answered 500), the access log (log/slog: method, path, status, bytes,
// duration, tenant, prompt/cached/generated tokens), the write bound, the
// body limit, and authentication. The write bound (Options.WriteTimeout)
// renews the connection's write deadline before every write and flush of
// every route's answer: a client that stops reading makes a write fail
// once it has made no progress for the timeout, which cancels the
// request's context (net/http does on a failed write), so its handler
// ends and its generation is cancelled as when the client goes away.
//
// # Tenants
//
// With Options.APIKeysFile every route but GET /health, /metrics and
// /api/version needs "Authorization: Bearer KEY" (401 otherwise), and
// /metrics follows the admin endpoint's rule (its byte counts would tell
// a tenant what other tenants cached); the key's tenant and the request's
// optional cache_salt give the cache salt (serve/tenant), so tenants never
// share cache entries. Without keys the server serves the single tenant
// "local", refuses to listen anywhere but loopback (ErrNotLoopback), and
// refuses (403) what a page from elsewhere makes a local browser send. /slots hides other tenants' request IDs.
//
// # Sampling defaults
//
// Each family keeps its own defaults: OpenAI routes temperature 1 and
// top_p 1 with no top_k or min_p (both accepted as extensions); llama.cpp
// temperature 0.8, top_k 40, top_p 0.95, min_p 0.05; Ollama temperature
// 0.8, top_k 40, top_p 0.9, repeat_penalty 1.1. A request without a seed
// gets a random one; with a seed its output is the same alone or beside
// other requests (the kernels are batch-invariant).
//
// # Metrics
//
// GET /metrics exposes, from a registry of the server's own:
// muser_requests_total{route,code}, muser_prompt_tokens_total,
// muser_generated_tokens_total, muser_cached_tokens_total{source},
// muser_cache_hit_ratio, muser_time_to_first_token_seconds{route},
// muser_inter_token_seconds, muser_request_duration_seconds{route},
// muser_queue_depth, muser_slots_busy, muser_store_bytes,
// muser_receipts_total{reason}, muser_publishes_total{result},
// muser_publish_bytes_total, muser_publish_pending, and the Go and
// process collectors; metrics_ops.go adds build and model info, slots,
// context and block size, the store's pack count, restore, prefill and
// verify timings and gc evictions.
//
// # Admin endpoint
//
// The server owns its store, so the operator commands run through it
// while it serves: handler_admin.go answers /admin/v1/ with the
// operations of serve/adminapi.Local on the server's store, admitting
// loopback clients, or with Options.AdminKeyFile anyone with the admin
// key. Serve writes Home/serve.json (adminapi.ServeFile) once it listens
// and removes it when it stops; the pack and receipts commands find the
// server through it.
//
// # Shutdown
//
// When Serve's context ends it stops accepting, lets in-flight requests
// finish for Options.ShutdownGrace (ForceStop ends the grace at once),
// cancels the rest, publishes the blocks
// of every finished request, closes the store and the model, and returns
// nil: for a server, a shutdown asked for by a signal is success.
package serve
