//! # switchyard-gateway
//!
//! A model gateway: serves Google's GenerateContent API (what Gemini CLI speaks) and OpenAI's Chat
//! Completions API (`POST /v1/chat/completions`, what OpenCode speaks) on loopback and forwards
//! every request to an OpenAI-compatible Chat Completions upstream, translating both ways with
//! `switchyard-translate` and recording each exchange with `switchyard-records`. Each guest API
//! is one `ingress::Ingress` (how a request is prepared, how the neutral model turn is framed,
//! how failures are shaped); everything between is one exchange for all of them (`exchange`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), switchyard_gateway::GatewayError> {
//! use switchyard_gateway::{Gateway, GatewayConfig};
//! let handle = Gateway::start(GatewayConfig::new("http://127.0.0.1:8000/v1", "qwen3")).await?;
//! println!("{}", handle.banner(None, "qwen3")); // Gemini CLI env, OpenCode provider
//! handle.shutdown().await?;
//! # Ok(()) }
//! ```
//!
//! ## Sessions and call ids
//! Every delivered call gets the gateway's own id, unique in the run; the upstream's
//! `tool_calls[].id` is kept beside it and restored in later requests' history where it is
//! unique in the session (see the README, "Call ids"). The gateway keeps one call-id ledger per
//! *session*: by default one gateway instance is one session (one `switchyard run`); a guest can
//! name its session with the `x-switchyard-session` header (Gemini CLI:
//! `GEMINI_CLI_CUSTOM_HEADERS`). The first request of a session adopts the call ids already in
//! its history (a resumed conversation); after that a tool result for an id the session never
//! delivered is a 400.
//!
//! ## The verdict
//! How the last main (streamed) exchange ended is kept (`GatewayHandle::verdict`): the host types
//! a run's outcome from it (`switchyard_events::verdict`), never only from what the guest says.
//!
//! ## Host tools
//! With a run's [`switchyard_binding::HostBinding`] (`GatewayDeps::binding`), every call of a
//! host tool in a completed turn gets a private identity argument and is entered in the binding
//! before the answer is sent; the answer's body confirms it once handed over whole, and revokes it
//! when dropped earlier (`delivery`). The identity is stripped from everything sent upstream.
//!
//! ## Retry and timeout budget
//! Per exchange the gateway makes at most `retries.upstream_attempts` (3) attempts for retryable
//! upstream failures (429, 408, 5xx, connect errors, first-byte timeouts, a stream that breaks
//! before anything reached the guest). Waits double from `initial_backoff_ms` (250 ms) up to
//! `max_backoff_ms` (4 s), and no retry starts later than `budget_ms` (10 s) after the exchange
//! began. An upstream's `Retry-After`/`retry-after-ms` is waited exactly when it fits that
//! budget; when it does not, it is never shortened: the guest gets the 429 (or 503) with
//! `Retry-After` (and Google's `RetryInfo`) and decides. Malformed tool calls get
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
//! 120 s, `idle_ms` (silence between body chunks) 120 s, `shutdown_ms` 3 s; towards guests
//! `guest_head_ms` 20 s, `guest_body_idle_ms` 30 s, `guest_body_ms` 120 s, `guest_write_ms` 30 s.
//! A `Retry-After` or `retry-after-ms` of any value (huge, negative, NaN, a date, garbage) is
//! parsed without panicking, clamped to an hour and then to the retry budget.
//!
//! What the upstream accepts and wants (`[translation]`,
//! [`switchyard_translate::ProviderOptions`]): `top_k`, `reasoning_effort`, how many stop
//! sequences, PNG re-encoding and its pixel budget, `tool_choice: "required"`, reasoning echoed
//! back as `reasoning_content` (carried through the guest in a `thoughtSignature`) and reasoning
//! shown to the guest as thought parts. One setting for every exchange.
//!
//! ## Images
//! PNG images are re-encoded as lossless WebP (`[translation] reencode_png`), each distinct image
//! once: new images are converted on the blocking pool, two at a time, and the conversion is
//! remembered (by the PNG's SHA-256, up to [`translation::IMAGE_CACHE_BYTES`] of WebP, least
//! recently used evicted), so an image that stays in the history costs a hash on later turns.
//! An image over the pixel budget (`max_image_pixels`, read from the header) or one that cannot
//! be decoded goes upstream unchanged, with the reason in the record's notes: converting never
//! fails a request.
//!
//! ## Records
//! With a recorder, every exchange is written as in flight once it is routed and again when it
//! ends; an exchange whose future is dropped before it ends (a unary guest closing its
//! connection while the upstream works) is stored as ended with an `abandoned` error. The
//! request path hands the record skeleton and the shared request bodies over as a closure that
//! the recorder's writer thread runs (parsing the bodies, merging the delivered chunks,
//! assembling `upstream_message` from the raw upstream events), then redacts and stores. At most
//! 64 MiB of bodies wait to be built; beyond that, and when the recorder's queue is full,
//! exchanges wait asynchronously for room: memory stays bounded and nothing is dropped.
//! With a context policy (`[context]`, see `context`), `context` holds its decision and
//! `context_request` the request it left.
//!
//! ## Guests, connections and hostile input
//! Guests are served by hyper's HTTP/1.1 server with `TCP_NODELAY`, at most
//! `limits.max_connections` at once (further ones wait in the kernel's accept queue). A request
//! head must arrive within `timeouts.guest_head_ms` (also the idle keep-alive bound), a write to
//! a guest that stopped reading fails after `timeouts.guest_write_ms`. A request body's first
//! `limits.connection_body_bytes` are read on its connection's own bound; the rest is charged,
//! as it arrives, to a byte budget shared by all connections (`limits.buffered_request_bytes`),
//! given back once the request is translated (see `intake`): a body over
//! `max_request_bytes` is a 413; one that pauses longer than `guest_body_idle_ms` or takes longer
//! than `guest_body_ms` in all a 408. The `Host` must name a loopback address, `localhost`, the
//! listen address or an `allowed_hosts` entry, and an `Origin` be exactly the gateway's own or an
//! `allowed_origins` entry (403 otherwise: DNS rebinding, cross-site posts); a non-loopback
//! listen needs an ingress key. Provider error text shown to the guest is redacted (the provider
//! key, the ingress key, credentials in the upstream URL). Session ledgers are
//! bounded (least recently used forgotten), session ids at most 128 bytes, and an upstream
//! server-sent event at most 16 MiB. An answer is bounded too (`limits.max_answer_bytes`,
//! `max_answer_tool_calls`, `max_answer_ms`): past a bound it ends with the ingress's error,
//! recorded as `answer_limit`, and the raw events a record keeps stop at
//! `limits.max_recorded_stream_bytes` per attempt (the cut noted). A body of 1 MiB or more is
//! parsed and translated on the blocking pool, never on the async workers that serve everyone
//! else.
//!
//! Every upstream, `http://` (a local vLLM, llama.cpp or Ollama) or `https://`, is reached with
//! reqwest (rustls); idle connections are pooled for 60 s.
//!
//! ## Streaming output
//! Each translated chunk is written as one single-line `data: <json>\r\n\r\n` frame as soon as
//! it is produced. Text deltas are forwarded immediately; function calls only complete, on the
//! last chunk, which always carries `finishReason` and `usageMetadata`; `modelVersion` is the
//! upstream model. Upstream failures after the response head become a raw Google error JSON
//! chunk (Gemini CLI turns it into an API error with that code).

pub mod auth;
mod call_ids;
pub mod codex;
pub mod config;
mod context;
mod delivery;
mod exchange;
pub mod guard;
mod images;
mod ingress;
mod intake;
mod metrics;
mod record_writer;
mod responses;
pub mod retry;
mod routes;
pub mod routing;
pub mod server;
mod sessions;
mod state;
mod trace;
pub mod translation;
pub mod upstream;
mod verdict;

pub use config::{
    ConfigError, DEFAULT_UPSTREAM_KEY_ENV, GatewayConfig, LimitConfig, RetryConfig, TimeoutConfig,
};
pub use routes::{OPENCODE_SESSION_HEADER, SESSION_HEADER};
pub use server::{
    Gateway, GatewayDeps, GatewayError, GatewayHandle, OPENCODE_KEY_ENV, OPENCODE_PROVIDER,
};
