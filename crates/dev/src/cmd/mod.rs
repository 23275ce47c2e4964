//! One module per developers' subcommand, and how they find the `switchyard` binary.

pub mod bench;
pub mod bench_opencode;
pub mod capture;
pub mod capture_acp;
pub mod capture_claude;
pub mod capture_codex;
pub mod capture_opencode;
pub mod capture_upstream;
pub mod demo;
pub mod validate;

use anyhow::{Context, Result, bail};
use std::path::PathBuf;

/// The product binary `switchyard`, built beside this one (`cargo build -p switchyard`): what
/// `bench run` measures.
pub fn product_binary() -> Result<PathBuf> {
    let here = std::env::current_exe().context("locating switchyard-dev")?;
    let product = here.with_file_name("switchyard");
    if !product.is_file() {
        bail!(
            "{} is not there: build it first (`cargo build -p switchyard`, with the same profile)",
            product.display()
        );
    }
    Ok(product)
}
