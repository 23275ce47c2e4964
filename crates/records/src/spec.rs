//! Where records live, as a `--records` value names it: a directory (the SQLite store
//! `DIR/switchyard.sqlite3`) or a `postgres://` / `postgresql://` URL (a [`crate::PgStore`]).
//! [`PgUrl`] keeps the URL's password out of everything it prints (`Display`, `Debug`, errors),
//! so a secret never reaches logs, error messages or the records themselves.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::postgres::PgStore;
use crate::sqlite::SqliteStore;
use crate::store::RecordStore;

/// Longest URL accepted (a connection string is short; anything longer is not one).
pub const MAX_URL_BYTES: usize = 4096;

/// What stands in for a password when a URL is shown.
const HIDDEN: &str = "****";

/// A PostgreSQL connection URL (`postgres://user:password@host:port/db?param=value`). `Display`
/// and `Debug` show it with the password (and a `password=` parameter) replaced by `****`;
/// [`PgUrl::expose`] is the only way to the real text.
#[derive(Clone, PartialEq, Eq)]
pub struct PgUrl {
    raw: String,
    redacted: String,
}

impl PgUrl {
    /// Parses a `postgres://` or `postgresql://` URL (at most [`MAX_URL_BYTES`]). The error never
    /// repeats the text.
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        if text.len() > MAX_URL_BYTES {
            return Err(StoreError::InvalidSpec(format!(
                "the URL is longer than {MAX_URL_BYTES} bytes"
            )));
        }
        if !is_postgres_url(text) {
            return Err(StoreError::InvalidSpec(
                "not a postgres:// or postgresql:// URL".to_owned(),
            ));
        }
        // The client accepts only lower-case schemes; the rest is kept as given.
        let text = &match text.split_once("://") {
            Some((scheme, rest)) => format!("{}://{rest}", scheme.to_ascii_lowercase()),
            None => text.to_owned(),
        };
        let mut url = url::Url::parse(text).map_err(|error| {
            // `url`'s messages name the defect, never the input.
            StoreError::InvalidSpec(format!("the PostgreSQL URL does not parse: {error}"))
        })?;
        // Checked here so that opening reports a bad URL as such, not as an outage.
        text.parse::<postgres::Config>().map_err(|_| {
            StoreError::InvalidSpec("the PostgreSQL URL is not a valid connection string".into())
        })?;
        if url.password().is_some() {
            let _ = url.set_password(Some(HIDDEN));
        }
        let hide_query = url
            .query_pairs()
            .any(|(key, _)| key.eq_ignore_ascii_case("password"));
        if hide_query {
            let pairs: Vec<(String, String)> = url
                .query_pairs()
                .map(|(key, value)| {
                    let value = if key.eq_ignore_ascii_case("password") {
                        HIDDEN.to_owned()
                    } else {
                        value.into_owned()
                    };
                    (key.into_owned(), value)
                })
                .collect();
            url.query_pairs_mut().clear().extend_pairs(pairs);
        }
        Ok(PgUrl {
            raw: text.to_owned(),
            redacted: url.to_string(),
        })
    }

    /// The URL as given, password included: only for connecting, never for printing.
    pub fn expose(&self) -> &str {
        &self.raw
    }

    /// The URL with its password hidden (what `Display` prints).
    pub fn redacted(&self) -> &str {
        &self.redacted
    }
}

impl std::fmt::Display for PgUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted)
    }
}

impl std::fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PgUrl").field(&self.redacted).finish()
    }
}

/// True when `text` starts with `postgres://` or `postgresql://` (any case).
pub fn is_postgres_url(text: &str) -> bool {
    let lower = |n: usize| text.get(..n).map(str::to_ascii_lowercase);
    lower("postgres://".len()).as_deref() == Some("postgres://")
        || lower("postgresql://".len()).as_deref() == Some("postgresql://")
}

/// Where a record store lives.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// A records directory holding `switchyard.sqlite3` (see [`crate::store_path`]).
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    Postgres(PgUrl),
}

impl StoreSpec {
    /// Reads a `--records` value: a PostgreSQL URL, or else a directory.
    pub fn parse(value: &str) -> Result<Self, StoreError> {
        if is_postgres_url(value) {
            return PgUrl::parse(value).map(StoreSpec::Postgres);
        }
        if value.is_empty() {
            return Err(StoreError::InvalidSpec(
                "empty records directory".to_owned(),
            ));
        }
        Ok(StoreSpec::Sqlite(PathBuf::from(value)))
    }

    /// [`StoreSpec::parse`] of a value held as a path (what settings keep): a path that reads as
    /// a PostgreSQL URL is one; any other path is a directory.
    pub fn from_path(path: &Path) -> Result<Self, StoreError> {
        Self::from_os_str(path.as_os_str())
    }

    /// [`StoreSpec::parse`] of an OS string (a URL must be UTF-8; a directory need not be).
    pub fn from_os_str(value: &OsStr) -> Result<Self, StoreError> {
        match value.to_str() {
            Some(text) => Self::parse(text),
            None => Ok(StoreSpec::Sqlite(PathBuf::from(value))),
        }
    }

    /// True for a PostgreSQL store.
    pub fn is_postgres(&self) -> bool {
        matches!(self, StoreSpec::Postgres(_))
    }

    /// The records directory of a SQLite store (`None` for PostgreSQL, which has none: files a
    /// run keeps next to its records, such as session state, need a directory of their own).
    pub fn dir(&self) -> Option<&Path> {
        match self {
            StoreSpec::Sqlite(dir) => Some(dir),
            StoreSpec::Postgres(_) => None,
        }
    }

    /// Opens (or creates) the store: for a directory, creates it and `DIR/switchyard.sqlite3`;
    /// for PostgreSQL, connects and applies the schema migrations. Both recover what dead writers
    /// left in flight.
    pub fn open(&self) -> Result<Box<dyn RecordStore>, StoreError> {
        Ok(match self {
            StoreSpec::Sqlite(dir) => {
                std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                    path: dir.display().to_string(),
                    source,
                })?;
                Box::new(SqliteStore::open(crate::store_path(dir))?)
            }
            StoreSpec::Postgres(url) => Box::new(PgStore::open(url)?),
        })
    }

    /// Opens an existing store, never creating one: [`StoreError::Missing`] when the directory
    /// holds no store, or the database has no Switchyard schema.
    pub fn open_existing(&self) -> Result<Box<dyn RecordStore>, StoreError> {
        Ok(match self {
            StoreSpec::Sqlite(dir) => Box::new(SqliteStore::open_existing(crate::store_path(dir))?),
            StoreSpec::Postgres(url) => Box::new(PgStore::open_existing(url)?),
        })
    }
}

impl std::str::FromStr for StoreSpec {
    type Err = StoreError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        StoreSpec::parse(value)
    }
}

impl std::fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreSpec::Sqlite(dir) => write!(f, "{}", dir.display()),
            StoreSpec::Postgres(url) => write!(f, "{url}"),
        }
    }
}

impl std::fmt::Debug for StoreSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreSpec::Sqlite(dir) => f.debug_tuple("Sqlite").field(dir).finish(),
            StoreSpec::Postgres(url) => f.debug_tuple("Postgres").field(url).finish(),
        }
    }
}

/// The records directory a `--records` value held as a path names: `value` itself, or `None`
/// for a PostgreSQL URL (files a run keeps beside its records, such as its run directory and its
/// session state for `--resume`, then go elsewhere or are not kept).
pub fn local_records_dir(value: &Path) -> Option<&Path> {
    match value.to_str() {
        Some(text) if is_postgres_url(text) => None,
        _ => Some(value),
    }
}

/// Shows `value` (a `--records` value held as a path) with any PostgreSQL password hidden: for
/// messages about a records location that may be a URL.
pub fn display_records(value: &Path) -> String {
    match StoreSpec::from_path(value) {
        Ok(spec) => spec.to_string(),
        Err(_) if value.to_str().is_some_and(is_postgres_url) => {
            "<an invalid PostgreSQL URL>".to_owned()
        }
        Err(_) => value.display().to_string(),
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
