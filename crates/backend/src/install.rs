//! Pinned guest installs: install an exact npm package version into a private prefix, seal it
//! with a manifest of every file's SHA-256, and verify the seal before every run.
//!
//! # Usage
//! ```no_run
//! use std::path::Path;
//! use switchyard_backend::install::{install_npm, verify, NpmInstallOptions};
//! let prefix = Path::new("/var/lib/switchyard/guests/gemini-cli-0.61.0");
//! let options = NpmInstallOptions { offline: true, ..NpmInstallOptions::default() };
//! install_npm("@google/gemini-cli", "0.61.0", prefix, &options)?; // installs + seals
//! let verified = verify(prefix, "@google/gemini-cli", "0.61.0")?;   // before every run
//! println!("run node {}", verified.entry.display());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Files
//! * `PREFIX/switchyard-manifest.json` ([`MANIFEST_FILE`]): schema, package, version, creation
//!   time, entry script, and `{path, size, sha256}` for every regular file below the prefix,
//!   plus every symlink with its target (npm's `node_modules/.bin/*` links).
//! * `PREFIX/.switchyard-verify-cache.json` ([`VERIFY_CACHE_FILE`]): for each file whose
//!   content was last seen matching the manifest, its stat tuple `(size, mtime_ns, ctime_ns,
//!   inode, dev)`.
//!
//! # Threat model (honest version)
//! [`verify`] re-hashes only files whose stat tuple differs from the cache. Writing, truncating,
//! renaming over, chmod-ing or touching a file always changes its **ctime**, which user space
//! cannot set back (only changing the system clock or raw block-device access could), so any
//! such change forces a re-hash even if size and mtime are restored. Files changed within
//! [`RACY_WINDOW`] of being recorded are not trusted from the cache (ctime has coarse clock
//! granularity), and a file that changes while being hashed is not cached. New, missing and
//! symlinked paths are found by a full directory walk on every verify.
//!
//! What this does **not** defend against: anyone who can write the prefix can also rewrite the
//! manifest and the cache (nothing is signed), so the seal catches accidental and uninformed
//! changes (a stray `npm install`, an editor, a partial copy, a different version, another tool
//! patching the bundle), not a deliberate attacker running as the same user. Keep the prefix
//! owned by a user the guest cannot write as if that matters. [`verify_full`] ignores the cache
//! and hashes everything.

mod error;
mod manifest;
mod npm;
mod verify;

pub use error::InstallError;
pub use manifest::{
    FileRecord, MANIFEST_FILE, MANIFEST_SCHEMA, Manifest, SymlinkRecord, TEMPORARY_PREFIX, seal,
};
pub use npm::{Install, NpmInstallOptions, install_npm};
pub use verify::{RACY_WINDOW, VERIFY_CACHE_FILE, VerifiedInstall, verify, verify_full};
