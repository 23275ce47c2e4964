//! Where Switchyard keeps its own data, how it finds programs, and the run's random tokens.

use std::path::PathBuf;

/// Switchyard's data directory: `$SWITCHYARD_HOME`, else `$XDG_DATA_HOME/switchyard`, else
/// `~/.local/share/switchyard`.
pub fn switchyard_home() -> PathBuf {
    if let Some(home) = std::env::var_os("SWITCHYARD_HOME") {
        return PathBuf::from(home);
    }
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME") {
        return PathBuf::from(xdg).join("switchyard");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".local/share/switchyard")
}

/// The first `program` on `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// A fresh random token (hex of two v4 UUIDs: 244 random bits).
pub fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}
