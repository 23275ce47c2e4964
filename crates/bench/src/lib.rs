//! # switchyard-bench
//!
//! Switchyard's measurements, kept out of the product crates: they use only the product's
//! public API (the gateway, the records writer, the scripted upstreams of `switchyard-testkit`).
//! [`gateway`] backs `switchyard-dev bench gateway` and `cargo bench -p switchyard-bench --bench
//! gateway`; [`endless`] backs `switchyard-dev bench endless` (memory while an upstream streams
//! without end); `benches/translation.rs` times the request translation alone.

pub mod endless;
pub mod gateway;
