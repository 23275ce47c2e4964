//! # switchyard-bench
//!
//! Switchyard's measurements, kept out of the product crates: they use only the product's
//! public API (the gateway, the records writer, the scripted upstreams of `switchyard-testkit`).
//! [`gateway`] backs `switchyard-dev bench gateway` and `cargo bench -p switchyard-bench --bench
//! gateway`; [`endless`] backs `switchyard-dev bench endless` (memory while an upstream streams
//! without end); [`queue`] backs `switchyard-dev bench queue` (the PostgreSQL run queue: one
//! worker against three, database writes per run); `benches/translation.rs` times the request
//! translation alone.

pub mod endless;
pub mod gateway;
pub mod queue;
