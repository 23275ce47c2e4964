//! Verifying a sealed install against its manifest, with a stat-based cache so that an
//! unchanged install costs one directory walk and one `lstat` per file instead of hashing
//! ~100 MB. See the threat model in the [`super`] module docs.

use std::collections::BTreeMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::InstallError;
use super::manifest::{
    Found, MANIFEST_FILE, MANIFEST_SCHEMA, Manifest, hash_many, read_package_json, walk,
    write_atomically,
};

/// Name of the verification cache file inside the prefix.
pub const VERIFY_CACHE_FILE: &str = ".switchyard-verify-cache.json";

/// Files whose ctime is this close to the moment they were recorded are not trusted from the
/// cache: file timestamps come from a coarse clock (and some file systems keep whole seconds),
/// so a later same-tick change could leave the stat tuple unchanged.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

const CACHE_SCHEMA: u32 = 1;

/// A sealed install that matched its manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedInstall {
    /// The prefix that was verified.
    pub prefix: PathBuf,
    /// The manifest it matched.
    pub manifest: Manifest,
    /// Absolute path of the entry script (run it with `node`).
    pub entry: PathBuf,
    /// Regular files checked.
    pub files_checked: usize,
    /// Files whose content had to be hashed (0 when the cache covered everything).
    pub files_hashed: usize,
    /// Bytes hashed.
    pub bytes_hashed: u64,
}

/// The identity of a file as far as `lstat` can tell. Any write, truncate, chmod, rename over
/// or touch changes `ctime_ns`, which user space cannot set back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StatKey {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub inode: u64,
    pub dev: u64,
}

impl StatKey {
    pub(crate) fn of(metadata: &Metadata) -> Self {
        Self {
            size: metadata.size(),
            mtime_ns: metadata
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(metadata.mtime_nsec()),
            ctime_ns: metadata
                .ctime()
                .saturating_mul(1_000_000_000)
                .saturating_add(metadata.ctime_nsec()),
            inode: metadata.ino(),
            dev: metadata.dev(),
        }
    }

    /// True if the file last changed at least [`RACY_WINDOW`] before `now`.
    pub(crate) fn is_settled(&self, now: SystemTime) -> bool {
        let now_ns = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        self.ctime_ns <= now_ns - RACY_WINDOW.as_nanos() as i64
    }
}

/// Stat tuples of files whose content last matched the manifest identified by
/// `manifest_sha256`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct VerifyCache {
    pub schema: u32,
    pub manifest_sha256: String,
    pub files: BTreeMap<String, StatKey>,
}

impl VerifyCache {
    /// An empty cache for the manifest whose bytes hash to `manifest_sha256`.
    pub(crate) fn new(manifest_sha256: String) -> Self {
        Self {
            schema: CACHE_SCHEMA,
            manifest_sha256,
            files: BTreeMap::new(),
        }
    }
}

/// Writes the cache; a failure (e.g. a read-only prefix) only costs speed, so it is logged.
pub(crate) fn write_cache(prefix: &Path, cache: &VerifyCache) {
    let Ok(bytes) = serde_json::to_vec(cache) else {
        return;
    };
    if let Err(error) = write_atomically(&prefix.join(VERIFY_CACHE_FILE), &bytes) {
        tracing::warn!(%error, "cannot write the install verification cache");
    }
}

/// The stored cache if it belongs to this manifest and schema, else an empty one.
fn read_cache(prefix: &Path, manifest_sha256: &str) -> VerifyCache {
    let cache: Option<VerifyCache> = std::fs::read(prefix.join(VERIFY_CACHE_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    match cache {
        Some(cache) if cache.schema == CACHE_SCHEMA && cache.manifest_sha256 == manifest_sha256 => {
            cache
        }
        _ => VerifyCache::new(manifest_sha256.to_owned()),
    }
}

/// Verifies `prefix` holds exactly the sealed `package@version`, re-hashing only files whose
/// stat tuple changed since they were last seen intact.
pub fn verify(
    prefix: &Path,
    package: &str,
    version: &str,
) -> Result<VerifiedInstall, InstallError> {
    verify_with(prefix, package, version, true)
}

/// Like [`verify`] but hashes every file regardless of the cache (and refreshes the cache).
pub fn verify_full(
    prefix: &Path,
    package: &str,
    version: &str,
) -> Result<VerifiedInstall, InstallError> {
    verify_with(prefix, package, version, false)
}

fn verify_with(
    prefix: &Path,
    package: &str,
    version: &str,
    use_cache: bool,
) -> Result<VerifiedInstall, InstallError> {
    let (manifest, manifest_sha256) = load_manifest(prefix)?;
    check_identity(prefix, &manifest, package, version)?;

    let mut found = walk(prefix)?;
    for record in &manifest.symlinks {
        match found.remove(&record.path) {
            Some(Found::Symlink(target)) if target == record.target => {}
            Some(Found::Symlink(target)) => {
                return Err(InstallError::SymlinkNotAllowed {
                    path: record.path.clone(),
                    target,
                });
            }
            _ => {
                return Err(InstallError::FileMissing {
                    path: record.path.clone(),
                });
            }
        }
    }
    let mut stats = Vec::with_capacity(manifest.files.len());
    for record in &manifest.files {
        match found.remove(&record.path) {
            Some(Found::File(metadata)) => stats.push(StatKey::of(&metadata)),
            Some(Found::Symlink(target)) => {
                return Err(InstallError::SymlinkNotAllowed {
                    path: record.path.clone(),
                    target,
                });
            }
            Some(Found::Other) => {
                return Err(InstallError::UnsupportedFileType {
                    path: record.path.clone(),
                });
            }
            None => {
                return Err(InstallError::FileMissing {
                    path: record.path.clone(),
                });
            }
        }
    }
    // Whatever is left was not sealed.
    if let Some((path, extra)) = found.into_iter().next() {
        return Err(match extra {
            Found::Symlink(target) => InstallError::SymlinkNotAllowed { path, target },
            Found::File(_) => InstallError::FileAdded { path },
            Found::Other => InstallError::UnsupportedFileType { path },
        });
    }

    let mut cache = if use_cache {
        read_cache(prefix, &manifest_sha256)
    } else {
        VerifyCache::new(manifest_sha256)
    };
    let mut cache_changed = !use_cache;
    let mut to_hash = Vec::new();
    for (index, (record, stat)) in manifest.files.iter().zip(&stats).enumerate() {
        if stat.size != record.size {
            return Err(InstallError::FileChanged {
                path: record.path.clone(),
            });
        }
        if cache.files.get(&record.path) != Some(stat) {
            to_hash.push(index);
        }
    }
    let paths: Vec<&str> = to_hash
        .iter()
        .map(|&index| manifest.files[index].path.as_str())
        .collect();
    let now = SystemTime::now();
    let mut bytes_hashed = 0;
    for (&index, hashed) in to_hash.iter().zip(hash_many(prefix, &paths)) {
        let record = &manifest.files[index];
        let hashed = hashed?;
        bytes_hashed += hashed.size;
        if hashed.size != record.size || hashed.sha256 != record.sha256 {
            cache.files.remove(&record.path);
            write_cache(prefix, &cache);
            return Err(InstallError::FileChanged {
                path: record.path.clone(),
            });
        }
        match hashed.stable_stat.filter(|stat| stat.is_settled(now)) {
            Some(stat) => cache.files.insert(record.path.clone(), stat),
            None => cache.files.remove(&record.path),
        };
        cache_changed = true;
    }
    if cache_changed {
        write_cache(prefix, &cache);
    }
    Ok(VerifiedInstall {
        prefix: prefix.to_path_buf(),
        entry: prefix.join(&manifest.entry),
        files_checked: manifest.files.len(),
        files_hashed: to_hash.len(),
        bytes_hashed,
        manifest,
    })
}

fn load_manifest(prefix: &Path) -> Result<(Manifest, String), InstallError> {
    let path = prefix.join(MANIFEST_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(InstallError::ManifestMissing { manifest: path });
        }
        Err(error) => return Err(InstallError::io(path, error)),
    };
    let manifest: Manifest =
        serde_json::from_slice(&bytes).map_err(|error| InstallError::ManifestInvalid {
            manifest: path.clone(),
            reason: error.to_string(),
        })?;
    if manifest.schema != MANIFEST_SCHEMA {
        return Err(InstallError::ManifestInvalid {
            manifest: path,
            reason: format!("unsupported schema {}", manifest.schema),
        });
    }
    Ok((manifest, hex::encode(Sha256::digest(&bytes))))
}

fn check_identity(
    prefix: &Path,
    manifest: &Manifest,
    package: &str,
    version: &str,
) -> Result<(), InstallError> {
    if manifest.package != package {
        return Err(InstallError::PackageMismatch {
            expected: package.to_owned(),
            found: manifest.package.clone(),
        });
    }
    let package_json_version = read_package_json(prefix, package).ok().and_then(|json| {
        json.get("version")
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    });
    if manifest.version != version || package_json_version.as_deref() != Some(version) {
        return Err(InstallError::VersionMismatch {
            package: package.to_owned(),
            expected: version.to_owned(),
            found_in_manifest: Some(manifest.version.clone()),
            found_in_package_json: package_json_version,
        });
    }
    Ok(())
}
