//! # switchyard-gateway
//!
//! A model gateway: serves Google's GenerateContent API (what Gemini CLI speaks) on loopback and
//! forwards every request to an OpenAI-compatible Chat Completions upstream, translating both ways
//! with `switchyard-translate` and recording each exchange with `switchyard-records`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), switchyard_gateway::GatewayError> {
//! use switchyard_gateway::{Gateway, GatewayConfig};
//! let handle = Gateway::start(GatewayConfig::new("http://127.0.0.1:8000/v1", "qwen3")).await?;
//! println!("{}", handle.banner(None)); // GOOGLE_GEMINI_BASE_URL=..., GEMINI_API_KEY=...
//! handle.shutdown().await?;
//! # Ok(()) }
//! ```
//!
//! ## Sessions and call ids
//! Upstream `tool_calls[].id`s are delivered unchanged as `functionCall.id` and must come back as
//! `functionResponse.id` (→ `tool_call_id`). The gateway keeps one call-id ledger per *session*:
//! by default one gateway instance is one session (one `switchyard run`); a guest can name its
//! session with the `x-switchyard-session` header (Gemini CLI: `GEMINI_CLI_CUSTOM_HEADERS`).
//! The first request of a session adopts the function-call ids already in its history (a resumed
//! conversation); after that a `functionResponse` id the session never delivered is a 400, and an
//! upstream that reuses an id already delivered in the session is treated like a malformed call
//! (retried, then `MALFORMED_FUNCTION_CALL`).
//!
//! ## Retry and timeout budget
//! Per exchange the gateway makes at most `retries.upstream_attempts` (3) attempts for retryable
//! upstream failures (429, 408, 5xx, connect errors, first-byte timeouts, a stream that breaks
//! before anything reached the guest). Waits double from `initial_backoff_ms` (250 ms), honour
//! `Retry-After`/`retry-after-ms` but never exceed `max_backoff_ms` (4 s), and no retry starts
//! later than `budget_ms` (10 s) after the exchange began. Malformed tool calls get
//! `malformed_retries` (2) extra attempts within the same time budget.
//!
//! Gemini CLI retries too (`general.maxAttempts`; `switchyard run` sets 2; backoff 5 s, 10 s, ...,
//! ±30 %, and 429/499/5xx are retried). So the two do not multiply, when the gateway gives up on a
//! retryable failure it answers (by default, `retries.guest_fail_fast = true`) with 429
//! `RESOURCE_EXHAUSTED` (upstream said 429) or 503 `UNAVAILABLE` (anything else) whose message
//! contains `limit: 0`: Gemini CLI classifies that as a terminal quota error and stops at once.
//! Worst case for a dead upstream is therefore about 10 s of gateway retrying, and a run fails
//! well within a minute. With `guest_fail_fast = false` the status is passed on with a
//! `RetryInfo` detail (when the upstream gave a delay) and the guest retries as it likes; the
//! worst case is then `maxAttempts × (10 s + guest backoff)`.
//! Non-retryable upstream statuses (400, 401, 403, 404, ...) are passed on in Google error shape
//! (404 makes Gemini CLI stop with ModelNotFound; 400/401/403 are not retried).
//! A response whose content cannot be used (invalid JSON, an `error` object inside a 200 body or
//! stream, data after `[DONE]`) is not retried by the gateway and is answered alike for streamed
//! and non-streamed exchanges: an error the upstream reported with a client status (4xx except
//! 408/429) as that error, anything else like a failure the gateway gave up on (above).
//!
//! Timeouts (`[timeouts]`): `connect_ms` 5 s, `first_byte_ms` (request sent → response head)
//! 120 s, `idle_ms` (silence between body chunks) 120 s, `shutdown_ms` 3 s.
//!
//! What the upstream accepts and wants (`[translation]`,
//! [`switchyard_translate::ProviderOptions`]): `top_k`, `reasoning_effort`, how many stop
//! sequences, PNG re-encoding, `tool_choice: "required"`, reasoning echoed back as
//! `reasoning_content` (carried through the guest in a `thoughtSignature`) and reasoning shown to
//! the guest as thought parts. One setting for every exchange: the translation cache does not
//! depend on it.
//!
//! ## Translation cache
//! Gemini CLI repeats the same ~45 KB system prompt and tool declarations on every request.
//! [`translation::RequestTranslator`] translates them once per (system prompt, tools, upstream
//! model) and splices the cached bytes into later requests; each cache entry is only used after
//! the splice reproduced the full translation byte for byte (see the module docs).
//! PNG images are re-encoded as lossless WebP once: the conversion is remembered (by the PNG's
//! SHA-256, up to [`translation::IMAGE_CACHE_BYTES`] of WebP, least recently used evicted), so an
//! image that stays in the history costs a hash on later turns instead of a re-encode (a 1280×800
//! screenshot: 27.9 ms → 42.5 µs per request, `cargo bench --bench translation`).
//!
//! ## Records
//! With a recorder, every exchange is upserted when it ends, and also as in flight when it is
//! still running 10 ms after it began (so a long exchange is in the store while it runs and a
//! crash leaves it marked incomplete; a short one is stored once). An exchange whose future is
//! dropped before it ends (a unary guest closing its connection while the upstream works) is
//! stored as ended with an `abandoned` error. The request path only hands shared byte handles to
//! the recorder, as deferred writes its writer thread builds, plus, when the exchange ends,
//! `guest_response` (the chunks the guest received merged into one GenerateContent response,
//! serialized there so the chunks are freed where they were made). The writer parses the guest
//! and upstream requests (unless the translation cache supplied the system prompt and tools: then
//! they are stored as text pieces, unparsed), assembles `upstream_message` (the upstream's
//! assistant message as an OpenAI chat message: `content`, `reasoning_content`, `tool_calls`
//! with the upstream's ids and argument strings), then redacts and stores it. The notes carry
//! the request translation's report and, per attempt, the response translation's (upstream
//! fields the gateway does not model, with counts, synthesized ids, reasoning not forwarded,
//! ...). The writer runs below the request threads (`switchyard_records::background`:
//! the idle scheduling class while it keeps up, where the process may leave that class again;
//! else nice +10): a request does not wait behind a record batch for a core.
//! An in-flight write that the same exchange's end write replaces within one batch is skipped,
//! and when records fall behind exchanges wait (asynchronously) for room: memory stays bounded and
//! nothing is dropped. `context_request` is always `None` (the gateway applies no context policy).
//! The store keeps the system prompt, the tool declarations and the history entries every request
//! repeats only once (as content-addressed blobs), so recording a long session does not store
//! them per exchange: its records grow with its length, not with its square.
//!
//! ## Connections and request bodies
//! The gateway serves HTTP/1.1 itself (`ingress.rs`: heads parsed by httparse, bodies framed by
//! `Content-Length` or chunked coding with the decoder the upstream client uses too, `wire.rs`;
//! the axum router called per request), with `TCP_NODELAY`. A connection holds a read buffer
//! only while read bytes wait to be used and writes each response head and frame straight from
//! its pieces, so an open stream keeps no HTTP buffer (hyper's server connection kept an 8 KiB
//! read and an 8 KiB write buffer per connection: 1,000 open streams cost the gateway process
//! ~38 MiB with it, ~25 MiB without).
//!
//! Request bodies are read within a byte budget shared by all connections (`[limits]
//! buffered_request_bytes`, 1 MiB): when many guests send at once, the bodies that do not fit
//! wait in the kernel instead of in the gateway's memory; a body over `max_request_bytes`
//! (256 MiB) is a 413, a guest pausing longer than `timeouts.guest_body_idle_ms` (30 s) while
//! sending one a 408. Upstream request bodies are sent
//! as the translation cache's shared segments with an exact `Content-Length`.
//!
//! An `http://` upstream (a local vLLM, llama.cpp or Ollama) is reached with a lean HTTP/1.1
//! client (`http1.rs`) that keeps each connection in the exchange's own task, writes the request
//! from its segments without a write buffer and holds no read buffer while it waits; idle
//! connections are pooled for 60 s. An `https://` upstream goes through reqwest (rustls).
//!
//! ## Streaming output
//! Each translated chunk is written as one single-line `data: <json>\r\n\r\n` frame as soon as
//! it is produced. Text deltas are forwarded immediately; function calls only complete, on the
//! last chunk, which always carries `finishReason` and `usageMetadata`; `modelVersion` is the
//! upstream model. Upstream failures after the response head become a raw Google error JSON
//! chunk (Gemini CLI turns it into an API error with that code).

pub mod auth;
pub mod config;
mod exchange;
pub mod guard;
mod images;
mod intake;
mod record_writer;
pub mod retry;
pub mod routing;
pub mod server;
mod sessions;
mod trace;
pub mod translation;
pub mod upstream;

pub use config::{
    ConfigError, DEFAULT_UPSTREAM_KEY_ENV, GatewayConfig, LimitConfig, RetryConfig, TimeoutConfig,
};
pub use server::{Gateway, GatewayDeps, GatewayError, GatewayHandle, SESSION_HEADER};
