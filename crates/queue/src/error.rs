//! The queue's errors: a database that is gone (worth retrying) apart from one that refused
//! (a bug or a bad schema), as the records store tells them apart.

/// What went wrong with the queue.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The server is unreachable, the connection was lost, or the server is shutting down.
    #[error("the queue database is unavailable ({context}): {message}")]
    Unavailable {
        context: &'static str,
        message: String,
    },
    /// The server refused a statement.
    #[error("the queue database refused {context}: {message}")]
    Backend {
        context: &'static str,
        message: String,
    },
    /// The database holds a newer queue schema than this build knows.
    #[error("the queue schema is at version {found}; this build knows up to {supported}")]
    UnsupportedSchema { found: i64, supported: i64 },
    /// A value in a row is not what the queue writes.
    #[error("a queue row holds {0}")]
    Corrupt(String),
    /// The caller's input cannot be queued.
    #[error("{0}")]
    Invalid(String),
}

impl QueueError {
    /// True when trying again later may work (the database was unavailable).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, QueueError::Unavailable { .. })
    }
}

/// A postgres error as a queue error, by whether the connection is the problem (the records
/// store's classification: `switchyard_records::postgres::describe`).
pub(crate) fn pg(context: &'static str) -> impl Fn(postgres::Error) -> QueueError {
    move |error| {
        let (unavailable, message) = switchyard_records::postgres::describe(&error);
        if unavailable {
            QueueError::Unavailable { context, message }
        } else {
            QueueError::Backend { context, message }
        }
    }
}
