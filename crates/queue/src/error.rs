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

/// A postgres error as a queue error, by whether the connection is the problem.
pub(crate) fn pg(context: &'static str) -> impl Fn(postgres::Error) -> QueueError {
    move |error| {
        let message = render(&error);
        if is_unavailable(&error) {
            QueueError::Unavailable { context, message }
        } else {
            QueueError::Backend { context, message }
        }
    }
}

/// The error with its sources (the client's `Display` says only its kind).
fn render(error: &postgres::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn is_unavailable(error: &postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.code() {
        // Connection exceptions (08…), the server shutting down or starting (57P01..57P03).
        Some(state) => {
            let code = state.code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
        }
        // No SQLSTATE: I/O, a closed socket, a connect timeout.
        None => error.as_db_error().is_none(),
    }
}
