//! Unit tests of the worker's pure parts; the worker against a real queue is in the `switchyard`
//! crate's `queue_live` tests.

use super::*;

#[test]
fn a_task_needs_a_workdir_and_a_prompt_and_names_its_agent() {
    let agent = check_task("workdir = \"/w\"\nprompt = \"p\"\nagent = \"opencode\"\n").unwrap();
    assert_eq!(agent, Agent::Opencode);
    assert_eq!(
        check_task("workdir = \"/w\"\nprompt = \"p\"\n").unwrap(),
        Agent::GeminiCli
    );
    assert!(check_task("prompt = \"p\"\n").is_err());
    assert!(check_task("workdir = \"/w\"\n").is_err());
    assert!(check_task("workdir = \"/w\"\nprompt = \"p\"\nrecords = \"/r\"\n").is_err());
    assert!(check_task("workdir = \"/w\"\nprompt = \"p\"\nno_such_key = 1\n").is_err());
}

#[test]
fn copy_tree_copies_files_dirs_and_links_without_following() {
    let from = tempfile::tempdir().unwrap();
    let to = tempfile::tempdir().unwrap();
    std::fs::create_dir(from.path().join("sub")).unwrap();
    std::fs::write(from.path().join("sub/a.txt"), "a").unwrap();
    std::fs::write(from.path().join("b.txt"), "b").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", from.path().join("link")).unwrap();
    let copy = to.path().join("copy");
    copy_tree(from.path(), &copy).unwrap();
    assert_eq!(
        std::fs::read_to_string(copy.join("sub/a.txt")).unwrap(),
        "a"
    );
    assert_eq!(std::fs::read_to_string(copy.join("b.txt")).unwrap(), "b");
    assert_eq!(
        std::fs::read_link(copy.join("link")).unwrap(),
        Path::new("/etc/passwd")
    );
}
