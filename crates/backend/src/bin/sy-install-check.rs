//! Operator/measurement helper for sealed installs: seals or verifies a prefix and prints how
//! long it took and how much was hashed.
//!
//! Usage: `sy-install-check <seal|verify|verify-full> <prefix> <package> <version>`
//! (e.g. `sy-install-check verify /tmp/copy @google/gemini-cli 0.61.0`). Exits 1 on refusal.
// A test helper: a failed step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Instant;

use switchyard_backend::install::{seal, verify, verify_full};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mode, prefix, package, version] = args.as_slice() else {
        eprintln!("usage: sy-install-check <seal|verify|verify-full> <prefix> <package> <version>");
        std::process::exit(2);
    };
    let prefix = PathBuf::from(prefix);
    let started = Instant::now();
    let result = match mode.as_str() {
        "seal" => seal(&prefix, package, version).map(|manifest| {
            let bytes: u64 = manifest.files.iter().map(|f| f.size).sum();
            format!("sealed {} files, {bytes} bytes", manifest.files.len())
        }),
        "verify" | "verify-full" => {
            let check = if mode == "verify" {
                verify
            } else {
                verify_full
            };
            check(&prefix, package, version).map(|verified| {
                format!(
                    "verified {} files, hashed {} files / {} bytes",
                    verified.files_checked, verified.files_hashed, verified.bytes_hashed
                )
            })
        }
        other => {
            eprintln!("unknown mode {other}");
            std::process::exit(2);
        }
    };
    let elapsed = started.elapsed();
    match result {
        Ok(summary) => println!("{mode}: {summary} in {:.1} ms", elapsed.as_secs_f64() * 1e3),
        Err(error) => {
            eprintln!(
                "{mode}: refused after {:.1} ms: {error}",
                elapsed.as_secs_f64() * 1e3
            );
            std::process::exit(1);
        }
    }
}
