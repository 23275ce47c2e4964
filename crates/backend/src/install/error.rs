//! Typed errors of installing, sealing and verifying a pinned guest install.

use std::path::PathBuf;

/// Why an install could not be created, sealed or trusted. Paths in variants are relative to
/// the prefix unless they say otherwise.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// `npm` could not be started.
    #[error("cannot run npm: {0}")]
    NpmUnavailable(#[source] std::io::Error),
    /// `npm install` exited unsuccessfully.
    #[error("npm install {spec} failed ({status}); last output:\n{output_tail}")]
    NpmFailed {
        spec: String,
        status: String,
        output_tail: String,
    },
    /// No manifest: the prefix was never sealed (or the manifest was removed).
    #[error("{} is missing: this install was never sealed; reinstall it", manifest.display())]
    ManifestMissing { manifest: PathBuf },
    /// The manifest exists but cannot be parsed or has an unknown schema.
    #[error("{} is unreadable: {reason}", manifest.display())]
    ManifestInvalid { manifest: PathBuf, reason: String },
    /// The install is not the expected package.
    #[error("expected package {expected}, but the install holds {found}")]
    PackageMismatch { expected: String, found: String },
    /// The install is not the expected version (per the manifest and/or package.json).
    #[error(
        "expected {package}@{expected}, found version {} in the manifest and {} in package.json",
        found_in_manifest.as_deref().unwrap_or("(none)"),
        found_in_package_json.as_deref().unwrap_or("(unreadable)")
    )]
    VersionMismatch {
        package: String,
        expected: String,
        found_in_manifest: Option<String>,
        found_in_package_json: Option<String>,
    },
    /// A sealed file's content differs from its recorded SHA-256 or size.
    #[error("{path} was modified after the install was sealed")]
    FileChanged { path: String },
    /// A sealed file is gone.
    #[error("{path} is missing from the sealed install")]
    FileMissing { path: String },
    /// A file that was not sealed appeared.
    #[error("{path} was added after the install was sealed")]
    FileAdded { path: String },
    /// A symlink that the manifest does not record (or that points elsewhere), or at seal
    /// time a symlink pointing outside the prefix.
    #[error("symlink {path} -> {target} is not allowed in a sealed install")]
    SymlinkNotAllowed { path: String, target: String },
    /// Something that is neither a regular file, directory nor symlink (fifo, socket, device).
    #[error("{path} is not a regular file, directory or symlink")]
    UnsupportedFileType { path: String },
    /// A path below the prefix is not valid UTF-8 (manifests store UTF-8 paths).
    #[error("path {} is not valid UTF-8", path.display())]
    NonUtf8Path { path: PathBuf },
    /// The package's entry script could not be determined or is not in the install.
    #[error("cannot determine the entry script of {package}: {reason}")]
    EntryMissing { package: String, reason: String },
    /// An I/O error on a specific path.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl InstallError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
