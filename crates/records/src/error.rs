//! Typed errors of the records crate. Backend-neutral: no SQLite or PostgreSQL types leak
//! through them.

use thiserror::Error;

/// An error from a [`crate::RecordStore`].
#[derive(Debug, Error)]
pub enum StoreError {
    /// The storage backend failed (open, query, write, commit...).
    #[error("record store backend error while {context}: {message}")]
    Backend {
        /// What the store was doing.
        context: &'static str,
        /// The backend's message.
        message: String,
    },
    /// The store's server cannot be reached, or the connection to it was lost (refused, closed,
    /// the server shutting down). Transient: the [`crate::Recorder`] retries a batch that failed
    /// so, with backoff, before it counts the batch's ops as lost.
    #[error("record store unavailable while {context}: {message}")]
    Unavailable {
        /// What the store was doing.
        context: &'static str,
        /// The client's message (never the connection URL's password).
        message: String,
    },
    /// A `--records` value that names no store (the value itself is not repeated: it may hold a
    /// password).
    #[error("invalid record store: {0}")]
    InvalidSpec(String),
    /// The store's files or lock files could not be accessed.
    #[error("record store I/O error at {path}: {source}")]
    Io {
        /// The path involved.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A stored record could not be (de)serialized.
    #[error("record (de)serialization failed for {what}: {source}")]
    Serde {
        /// Which record.
        what: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// There is no store at this path.
    #[error("no record store at {0}")]
    Missing(String),
    /// No run matches the given id or prefix.
    #[error("no run matches {0:?}")]
    RunNotFound(String),
    /// More than one run matches the given prefix.
    #[error("run prefix {prefix:?} is ambiguous: {count} runs match")]
    AmbiguousRunPrefix {
        /// The prefix given.
        prefix: String,
        /// How many runs match.
        count: usize,
    },
    /// No exchange matches the given id or prefix.
    #[error("no exchange matches {0:?}")]
    ExchangeNotFound(String),
    /// More than one exchange matches the given prefix.
    #[error("exchange prefix {prefix:?} is ambiguous: {count} exchanges match")]
    AmbiguousExchangePrefix {
        /// The prefix given.
        prefix: String,
        /// How many exchanges match.
        count: usize,
    },
    /// An exchange refers to a deduplicated sub-value (blob) the store does not hold.
    #[error("exchange {exchange} refers to blob {hash}, which the store does not hold")]
    MissingBlob {
        /// The blob's hash (`sha256:<hex>`).
        hash: String,
        /// The exchange id.
        exchange: String,
    },
    /// The database was written by a newer (unknown) schema version.
    #[error("record store schema version {found} is newer than supported version {supported}")]
    UnsupportedSchema {
        /// Version found in the store.
        found: i64,
        /// Highest version this build understands.
        supported: i64,
    },
}

impl StoreError {
    /// True for [`StoreError::Unavailable`]: the store may answer again later.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }
}

/// An error from the [`crate::Recorder`] handle.
#[derive(Debug, Error)]
pub enum RecordError {
    /// The recorder was closed (or its writer thread is gone); the op was not accepted.
    #[error("recorder is closed")]
    Closed,
    /// The writer thread could not persist some ops since the last flush.
    #[error("recorder failed to persist {failed_ops} op(s); last error: {last_error}")]
    WriteFailed {
        /// How many ops failed to persist since the previous flush.
        failed_ops: u64,
        /// The most recent store error, rendered.
        last_error: String,
    },
    /// The store became unreachable (its server stopped, the connection was lost) and stayed so
    /// through every retry: these ops were not persisted.
    #[error(
        "record store unavailable: {failed_ops} op(s) not persisted after retries; last error: {last_error}"
    )]
    StoreUnavailable {
        /// How many ops failed to persist since the previous flush.
        failed_ops: u64,
        /// The most recent store error, rendered.
        last_error: String,
    },
    /// Starting the recorder failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The writer thread could not be spawned.
    #[error("could not spawn the recorder writer thread: {0}")]
    Spawn(#[source] std::io::Error),
}
