use super::*;

#[test]
fn restored_session_files_never_bear_the_current_minute() {
    let saved = tempfile::tempdir().unwrap();
    let chats = saved.path().join("tmp/ws/chats");
    std::fs::create_dir_all(&chats).unwrap();
    let now = chrono::Utc::now().format("%Y-%m-%dT%H-%M").to_string();
    for name in [
        format!("session-{now}-abcdef12.jsonl"),
        "session-2026-01-01T00-00-abcdef12.jsonl".to_owned(),
        format!("session-{now}-99999999.jsonl"),
    ] {
        std::fs::write(chats.join(name), "{}").unwrap();
    }
    std::fs::write(saved.path().join("settings.json"), "{}").unwrap();
    let home = tempfile::tempdir().unwrap();
    restore_session_state(saved.path(), home.path(), "abcdef12-0000").unwrap();
    let mut names: Vec<String> = std::fs::read_dir(home.path().join("tmp/ws/chats"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3);
    let resumed: Vec<&String> = names
        .iter()
        .filter(|n| n.ends_with("-abcdef12.jsonl"))
        .collect();
    assert_eq!(resumed.len(), 2, "{names:?}");
    for name in resumed {
        // A minute can change during the test; the current one is never an earlier one.
        let later = chrono::Utc::now().format("%Y-%m-%dT%H-%M").to_string();
        assert!(!name.contains(&now) && !name.contains(&later), "{name}");
    }
    // Another session's file is left as it was; Switchyard's own files are not carried over.
    assert!(names.contains(&format!("session-{now}-99999999.jsonl")));
    assert!(!home.path().join("settings.json").exists());
}
