//! Test kit: scripted model upstreams on 127.0.0.1 and helpers to find the pinned guest CLIs.
//!
//! Used by integration tests, the capture tool, benchmarks and the demo. Nothing here reaches
//! beyond loopback.

pub mod chat_upstream;
pub mod fixtures;
pub mod genai_upstream;
pub mod guest;
pub mod hostile_workspace;
pub mod nginx;
pub mod otlp;
pub mod postgres;

/// A real one-page PDF ("Quarterly total: 42"), for runs whose agent reads a document.
pub const QUARTERLY_PDF: &[u8] = include_bytes!("../data/quarterly.pdf");
