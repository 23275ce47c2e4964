//! The seal of an install: [`Manifest`] types, the directory walk, file hashing and [`seal`].

use std::collections::BTreeMap;
use std::fs::Metadata;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::InstallError;
use super::verify::{StatKey, VerifyCache, write_cache};

/// Name of the manifest file inside the prefix.
pub const MANIFEST_FILE: &str = "switchyard-manifest.json";
/// Current manifest schema version.
pub const MANIFEST_SCHEMA: u32 = 1;

/// What a sealed install must contain. Paths are relative to the prefix, `/`-separated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`MANIFEST_SCHEMA`].
    pub schema: u32,
    /// npm package name, e.g. `@google/gemini-cli`.
    pub package: String,
    /// Exact version, e.g. `0.61.0`.
    pub version: String,
    /// RFC 3339 time of sealing.
    pub created_at: String,
    /// The package's entry script, e.g. `node_modules/@google/gemini-cli/bundle/gemini.js`.
    pub entry: String,
    /// Every regular file, sorted by path.
    pub files: Vec<FileRecord>,
    /// Every symlink, sorted by path (npm's `.bin` links).
    #[serde(default)]
    pub symlinks: Vec<SymlinkRecord>,
}

/// One sealed regular file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    pub path: String,
    pub size: u64,
    /// Lowercase hex SHA-256 of the content.
    pub sha256: String,
}

/// One sealed symlink; its target must resolve inside the prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SymlinkRecord {
    pub path: String,
    pub target: String,
}

/// What the walk found at one path.
#[derive(Debug)]
pub(crate) enum Found {
    File(Metadata),
    Symlink(String),
    Other,
}

/// Walks `prefix` (not following symlinks) and returns every non-directory entry by relative
/// path, skipping Switchyard's own files at the top level.
pub(crate) fn walk(prefix: &Path) -> Result<BTreeMap<String, Found>, InstallError> {
    let mut found = BTreeMap::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative_dir) = pending.pop() {
        let dir = prefix.join(&relative_dir);
        let entries = std::fs::read_dir(&dir).map_err(|e| InstallError::io(&dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| InstallError::io(&dir, e))?;
            let relative = relative_dir.join(entry.file_name());
            let key = relative
                .to_str()
                .ok_or_else(|| InstallError::NonUtf8Path {
                    path: relative.clone(),
                })?
                .to_owned();
            if relative_dir.as_os_str().is_empty() && is_switchyard_file(&key) {
                continue;
            }
            let path = entry.path();
            let metadata =
                std::fs::symlink_metadata(&path).map_err(|e| InstallError::io(&path, e))?;
            let file_type = metadata.file_type();
            if file_type.is_dir() {
                pending.push(relative);
            } else if file_type.is_file() {
                found.insert(key, Found::File(metadata));
            } else if file_type.is_symlink() {
                let target = std::fs::read_link(&path).map_err(|e| InstallError::io(&path, e))?;
                let target = target
                    .to_str()
                    .ok_or(InstallError::NonUtf8Path {
                        path: target.clone(),
                    })?
                    .to_owned();
                found.insert(key, Found::Symlink(target));
            } else {
                found.insert(key, Found::Other);
            }
        }
    }
    Ok(found)
}

fn is_switchyard_file(name: &str) -> bool {
    name == MANIFEST_FILE
        || name == super::verify::VERIFY_CACHE_FILE
        || name.starts_with(TEMPORARY_PREFIX)
}

/// Name prefix of the temporary files Switchyard writes beside its manifest and cache. The walk skips
/// them, so a verify running while another process writes its cache does not see an added file.
pub const TEMPORARY_PREFIX: &str = ".switchyard-partial-";

/// True if `target` (relative, as read from the link at `link_path`) stays inside the prefix.
pub(crate) fn symlink_stays_inside(link_path: &str, target: &str) -> bool {
    if Path::new(target).is_absolute() {
        return false;
    }
    let mut depth: Vec<&std::ffi::OsStr> = Path::new(link_path)
        .parent()
        .map(|parent| parent.iter().collect())
        .unwrap_or_default();
    for component in Path::new(target).components() {
        match component {
            Component::Normal(name) => depth.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if depth.pop().is_none() {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// [`symlink_stays_inside`] plus a check that the kernel's resolution of the link (which may
/// go through other links) ends inside `root`, the canonical prefix. Dangling links are refused.
fn symlink_resolves_inside(root: &Path, link_path: &str, target: &str) -> bool {
    symlink_stays_inside(link_path, target)
        && root
            .join(link_path)
            .canonicalize()
            .is_ok_and(|resolved| resolved.starts_with(root))
}

/// SHA-256 and size of one file, read in 256 KiB blocks.
pub(crate) fn hash_file(path: &Path) -> std::io::Result<(u64, String)> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        size += read as u64;
        hasher.update(&buffer[..read]);
    }
    Ok((size, hex::encode(hasher.finalize())))
}

/// Result of hashing one file: content digest plus the stat before and after reading.
pub(crate) struct Hashed {
    pub size: u64,
    pub sha256: String,
    /// Stat after hashing, if it equals the stat before (the content was stable).
    pub stable_stat: Option<StatKey>,
}

/// Hashes `paths` (relative to `prefix`) on a few threads; results in input order.
pub(crate) fn hash_many(prefix: &Path, paths: &[&str]) -> Vec<Result<Hashed, InstallError>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, 4)
        .min(paths.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Hashed, InstallError>>>> =
        Mutex::new((0..paths.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(relative) = paths.get(index) else {
                        break;
                    };
                    let result = hash_one(&prefix.join(relative));
                    results
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)[index] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .zip(paths)
        .map(|(result, relative)| {
            result.unwrap_or_else(|| {
                let missed = std::io::Error::other("a hashing thread stopped before this file");
                Err(InstallError::io(prefix.join(relative), missed))
            })
        })
        .collect()
}

fn hash_one(path: &Path) -> Result<Hashed, InstallError> {
    let before = std::fs::symlink_metadata(path).map_err(|e| InstallError::io(path, e))?;
    let (size, sha256) = hash_file(path).map_err(|e| InstallError::io(path, e))?;
    let after = std::fs::symlink_metadata(path).map_err(|e| InstallError::io(path, e))?;
    let (before, after) = (StatKey::of(&before), StatKey::of(&after));
    Ok(Hashed {
        size,
        sha256,
        stable_stat: (before == after && after.size == size).then_some(after),
    })
}

/// Parses `node_modules/<package>/package.json` (seal reads `name`, `version` and `bin`).
pub(crate) fn read_package_json(
    prefix: &Path,
    package: &str,
) -> Result<serde_json::Value, InstallError> {
    let path = package_json_path(prefix, package);
    let text = std::fs::read_to_string(&path).map_err(|e| InstallError::io(&path, e))?;
    serde_json::from_str(&text).map_err(|e| {
        InstallError::io(
            &path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })
}

pub(crate) fn package_json_path(prefix: &Path, package: &str) -> PathBuf {
    prefix
        .join("node_modules")
        .join(package)
        .join("package.json")
}

/// The entry script from package.json `bin`: a string, or the only entry of the map, or the
/// entry named like the package (without scope).
fn entry_script(package: &str, package_json: &serde_json::Value) -> Result<String, InstallError> {
    let missing = |reason: &str| InstallError::EntryMissing {
        package: package.to_owned(),
        reason: reason.to_owned(),
    };
    let bin = match package_json.get("bin") {
        Some(serde_json::Value::String(bin)) => bin.clone(),
        Some(serde_json::Value::Object(bins)) => {
            let unscoped = package.rsplit('/').next().unwrap_or(package);
            let chosen = if bins.len() == 1 {
                bins.values().next()
            } else {
                bins.get(unscoped)
            };
            chosen
                .and_then(|value| value.as_str())
                .ok_or_else(|| {
                    missing("package.json `bin` has several entries, none named like the package")
                })?
                .to_owned()
        }
        _ => return Err(missing("package.json has no `bin`")),
    };
    let bin = bin.trim_start_matches("./");
    Ok(format!("node_modules/{package}/{bin}"))
}

/// Seals the install at `prefix`: checks it holds `package@version`, hashes every file, and
/// writes [`MANIFEST_FILE`] (and a fresh verification cache). Refuses symlinks pointing
/// outside the prefix and special files.
pub fn seal(prefix: &Path, package: &str, version: &str) -> Result<Manifest, InstallError> {
    let package_json = read_package_json(prefix, package)?;
    let found_name = package_json.get("name").and_then(|v| v.as_str());
    if found_name != Some(package) {
        return Err(InstallError::PackageMismatch {
            expected: package.to_owned(),
            found: found_name.unwrap_or("(no name)").to_owned(),
        });
    }
    let found_version = package_json.get("version").and_then(|v| v.as_str());
    if found_version != Some(version) {
        return Err(InstallError::VersionMismatch {
            package: package.to_owned(),
            expected: version.to_owned(),
            found_in_manifest: None,
            found_in_package_json: found_version.map(str::to_owned),
        });
    }
    let entry = entry_script(package, &package_json)?;

    // package.json was just read below the prefix, so the prefix resolves.
    let root = prefix
        .canonicalize()
        .map_err(|e| InstallError::io(prefix, e))?;
    let mut file_paths = Vec::new();
    let mut symlinks = Vec::new();
    for (path, found) in walk(prefix)? {
        match found {
            Found::File(_) => file_paths.push(path),
            Found::Symlink(target) if symlink_resolves_inside(&root, &path, &target) => {
                symlinks.push(SymlinkRecord { path, target });
            }
            Found::Symlink(target) => return Err(InstallError::SymlinkNotAllowed { path, target }),
            Found::Other => return Err(InstallError::UnsupportedFileType { path }),
        }
    }
    if !file_paths.contains(&entry) {
        return Err(InstallError::EntryMissing {
            package: package.to_owned(),
            reason: format!("{entry} is not a regular file in the install"),
        });
    }
    let borrowed: Vec<&str> = file_paths.iter().map(String::as_str).collect();
    let mut files = Vec::with_capacity(file_paths.len());
    let mut settled_stats = BTreeMap::new();
    let now = std::time::SystemTime::now();
    for (path, hashed) in file_paths.iter().zip(hash_many(prefix, &borrowed)) {
        let hashed = hashed?;
        if let Some(stat) = hashed.stable_stat.filter(|stat| stat.is_settled(now)) {
            settled_stats.insert(path.clone(), stat);
        }
        files.push(FileRecord {
            path: path.clone(),
            size: hashed.size,
            sha256: hashed.sha256,
        });
    }
    let manifest = Manifest {
        schema: MANIFEST_SCHEMA,
        package: package.to_owned(),
        version: version.to_owned(),
        created_at: chrono::Utc::now().to_rfc3339(),
        entry,
        files,
        symlinks,
    };
    let mut text = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| InstallError::io(prefix.join(MANIFEST_FILE), std::io::Error::other(e)))?;
    text.push(b'\n');
    write_atomically(&prefix.join(MANIFEST_FILE), &text)?;
    let cache = VerifyCache {
        files: settled_stats,
        ..VerifyCache::new(hex::encode(Sha256::digest(&text)))
    };
    write_cache(prefix, &cache);
    Ok(manifest)
}

/// Writes `bytes` to a temporary sibling, then renames it over `path`.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), InstallError> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    // A unique name per writer: two processes writing the same file never share a temporary.
    let mut temporary = tempfile::Builder::new()
        .prefix(TEMPORARY_PREFIX)
        .tempfile_in(dir)
        .map_err(|e| InstallError::io(dir, e))?;
    temporary
        .write_all(bytes)
        .map_err(|e| InstallError::io(temporary.path(), e))?;
    temporary
        .persist(path)
        .map(drop)
        .map_err(|e| InstallError::io(path, e.error))
}

#[cfg(test)]
mod tests {
    use super::symlink_stays_inside;

    #[test]
    fn symlink_targets_are_checked_lexically() {
        assert!(symlink_stays_inside(
            "node_modules/.bin/gemini",
            "../@google/gemini-cli/bundle/gemini.js"
        ));
        assert!(!symlink_stays_inside(
            "node_modules/.bin/x",
            "../../../etc/passwd"
        ));
        assert!(!symlink_stays_inside("a", "/etc/passwd"));
        assert!(symlink_stays_inside("a/b", "./c"));
        assert!(!symlink_stays_inside("a", ".."));
    }
}
