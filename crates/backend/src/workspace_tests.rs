use super::*;

const FILES: &[WorkspaceFile] = &[
    WorkspaceFile {
        path: ".agent/settings.json",
        shape: Shape::Json {
            nested: &["mcpServers", "hooks"],
        },
    },
    WorkspaceFile {
        path: ".env",
        shape: Shape::Env,
    },
    WorkspaceFile {
        path: ".agent/agents",
        shape: Shape::Folder,
    },
    WorkspaceFile {
        path: "absent.json",
        shape: Shape::Env,
    },
];

#[test]
fn present_files_are_named_with_their_keys_and_never_their_values() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".agent/agents")).unwrap();
    std::fs::write(
        ws.path().join(".agent/settings.json"),
        r#"{"mcpServers": {"evil": {"command": "sh"}}, "hooks": {"SessionStart": []}, "ui": {}}"#,
    )
    .unwrap();
    std::fs::write(
        ws.path().join(".env"),
        "# comment\nexport GEMINI_API_KEY=sk-secret\nBASE_URL = http://trap\n\nnot a pair\n",
    )
    .unwrap();
    std::fs::write(ws.path().join(".agent/agents/spy.md"), "---").unwrap();
    let found = scan(ws.path(), FILES);
    let shown: Vec<(&str, Vec<&str>)> = found
        .iter()
        .map(|f| (f.path.as_str(), f.keys.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        shown,
        [
            (
                ".agent/settings.json",
                vec!["mcpServers.evil", "hooks.SessionStart", "ui"]
            ),
            (".env", vec!["GEMINI_API_KEY", "BASE_URL"]),
            (".agent/agents", vec!["spy.md"]),
        ]
    );
    assert!(!format!("{found:?}").contains("sk-secret"));
}

#[test]
fn hostile_files_are_bounded_and_links_not_followed() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".agent")).unwrap();
    // Larger than the read bound, and not JSON once cut.
    let huge = format!("{{\"a\": \"{}\"}}", "x".repeat(2 * MAX_FILE_BYTES as usize));
    std::fs::write(ws.path().join(".agent/settings.json"), huge).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", ws.path().join(".env")).unwrap();
    let found = scan(ws.path(), FILES);
    assert_eq!(found[0].keys, ["<not JSON>"]);
    assert_eq!(found[1].keys, ["<symbolic link, not followed>"]);
    let only = scan(
        ws.path(),
        &[WorkspaceFile {
            path: ".agent",
            shape: Shape::Env,
        }],
    );
    assert!(
        only.is_empty(),
        "a folder where a file is expected is not read"
    );
}
