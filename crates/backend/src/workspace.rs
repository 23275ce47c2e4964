//! What of an agent's own configuration a workspace carries: each agent lists the files it would
//! read from the workspace ([`WorkspaceFile`]), and [`scan`] reports the ones present, with the
//! keys they set, as `workspace_config_ignored` events. The workspace is hostile: files are read
//! up to [`MAX_FILE_BYTES`], folders listed up to [`MAX_ENTRIES`], never followed out of the
//! workspace, and values (an `.env`'s secrets) are never reported, only names.

use std::path::Path;

use serde_json::Value;
use switchyard_events::event::WorkspaceConfigIgnored;

/// Bytes of a workspace file read to name its keys.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Entries of a workspace folder named.
pub const MAX_ENTRIES: usize = 64;

/// How a workspace file is read for its keys.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    /// A JSON settings document: its top-level keys, and for the listed ones, their members
    /// (`mcpServers.evil`).
    Json { nested: &'static [&'static str] },
    /// `NAME=value` lines: the names.
    Env,
    /// A folder: its entries.
    Folder,
}

/// One file or folder an agent reads from its workspace.
#[derive(Debug, Clone, Copy)]
pub struct WorkspaceFile {
    /// Relative to the workspace.
    pub path: &'static str,
    pub shape: Shape,
}

/// The files of `files` present in `workdir`, each with what it sets.
pub fn scan(workdir: &Path, files: &[WorkspaceFile]) -> Vec<WorkspaceConfigIgnored> {
    files
        .iter()
        .filter_map(|file| {
            let path = workdir.join(file.path);
            // Never followed: a link could point anywhere on the host.
            let meta = std::fs::symlink_metadata(&path).ok()?;
            let keys = if meta.file_type().is_symlink() {
                vec!["<symbolic link, not followed>".to_owned()]
            } else {
                match file.shape {
                    Shape::Folder if meta.is_dir() => folder_entries(&path),
                    Shape::Folder => return None,
                    _ if !meta.is_file() => return None,
                    Shape::Json { nested } => json_keys(&read_bounded(&path), nested),
                    Shape::Env => env_names(&read_bounded(&path)),
                }
            };
            Some(WorkspaceConfigIgnored {
                path: file.path.to_owned(),
                keys,
            })
        })
        .collect()
}

fn read_bounded(path: &Path) -> String {
    use std::io::Read as _;
    let mut text = Vec::new();
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.take(MAX_FILE_BYTES).read_to_end(&mut text);
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// The keys of a JSON document (members of `nested` ones named `outer.inner`); a document
/// that does not parse (JSONC comments, garbage) is `<not JSON>`.
fn json_keys(text: &str, nested: &[&str]) -> Vec<String> {
    let Ok(Value::Object(top)) = serde_json::from_str::<Value>(text) else {
        return vec!["<not JSON>".to_owned()];
    };
    let mut keys = Vec::new();
    for (key, value) in &top {
        match value.as_object().filter(|_| nested.contains(&key.as_str())) {
            Some(members) => keys.extend(members.keys().map(|member| format!("{key}.{member}"))),
            None => keys.push(key.clone()),
        }
    }
    keys.truncate(MAX_ENTRIES);
    keys
}

/// The variable names of `NAME=value` lines (`export` allowed, comments skipped).
fn env_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let line = line.strip_prefix("export ").unwrap_or(line);
            let (name, _) = line.split_once('=')?;
            let name = name.trim();
            (!name.is_empty() && !name.starts_with('#')).then(|| name.to_owned())
        })
        .take(MAX_ENTRIES)
        .collect()
}

fn folder_entries(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .take(MAX_ENTRIES)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[cfg(test)]
#[path = "workspace_tests.rs"]
mod tests;
