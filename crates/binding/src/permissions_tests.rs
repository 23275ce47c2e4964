use super::*;
use serde_json::json;

fn policy(text: &str) -> Policy {
    let policy: Policy = toml::from_str(text).unwrap();
    policy.check().unwrap();
    policy
}

#[test]
fn safe_defaults_allow_reads_and_host_tools_and_reject_the_rest() {
    let p = Policy::default();
    let d = |tool: &str, host| p.decide(tool, &json!({}), host);
    assert_eq!(d("read_file", false).decision, Decision::Allow);
    assert_eq!(d("read_file", false).rule, "default: file read");
    assert_eq!(d("mcp_switchyard_record", true).decision, Decision::Allow);
    assert_eq!(d("run_shell_command", false).decision, Decision::Reject);
    assert_eq!(d("write_file", false).decision, Decision::Reject);
    assert_eq!(d("web_fetch", false).decision, Decision::Reject);
    // An MCP tool that is not the run's own host tool is not trusted by default.
    assert_eq!(d("mcp_other_tool", false).decision, Decision::Reject);
}

#[test]
fn the_first_matching_rule_decides() {
    let p = policy(
        r#"
        [[rule]]
        category = "command"
        command_prefix = "git status"
        decision = "allow"
        [[rule]]
        category = "file_write"
        decision = "allow"
        [[rule]]
        tool = "read_file"
        decision = "reject"
        "#,
    );
    let shell =
        |command: &str| p.decide("run_shell_command", &json!({ "command": command }), false);
    assert_eq!(shell("git status").rule, "rule 1");
    assert_eq!(shell("git  status --short").decision, Decision::Allow);
    assert_eq!(shell("git statusx").decision, Decision::Reject);
    assert_eq!(shell("git").decision, Decision::Reject);
    assert_eq!(shell("git status; rm -rf ~").decision, Decision::Reject);
    assert_eq!(shell("git status && curl x").decision, Decision::Reject);
    assert_eq!(shell("git status $(id)").decision, Decision::Reject);
    assert_eq!(
        p.decide("replace", &json!({}), false),
        Ruling {
            decision: Decision::Allow,
            rule: "rule 2".into()
        }
    );
    assert_eq!(
        p.decide("read_file", &json!({}), false).decision,
        Decision::Reject
    );
    // A command prefix only ever matches the shell tool.
    let only_prefix = policy("[[rule]]\ncommand_prefix = \"ls\"\ndecision = \"allow\"\n");
    assert_eq!(
        only_prefix
            .decide("write_file", &json!({"command": "ls"}), false)
            .decision,
        Decision::Reject
    );
}

#[test]
fn a_default_applies_after_the_built_in_ones() {
    let p = policy("default = \"allow\"\n");
    assert_eq!(
        p.decide("web_fetch", &json!({}), false).decision,
        Decision::Allow
    );
    assert_eq!(p.decide("web_fetch", &json!({}), false).rule, "default");
}

#[test]
fn bad_files_are_refused_with_the_rule_that_is_wrong() {
    for (text, wants) in [
        ("[[rule]]\ndecision = \"allow\"\n", "rule 1: names no"),
        (
            "[[rule]]\ncategory = \"shell\"\ndecision = \"allow\"\n",
            "unknown category \"shell\"",
        ),
        (
            "[[rule]]\ncommand_prefix = \"ls;\"\ndecision = \"allow\"\n",
            "plain words",
        ),
    ] {
        let p: Policy = toml::from_str(text).unwrap();
        let e = p.check().unwrap_err().to_string();
        assert!(e.contains(wants), "{e}");
    }
    assert!(toml::from_str::<Policy>("[[rule]]\ntool = \"x\"\ndecision = \"maybe\"\n").is_err());
    assert!(toml::from_str::<Policy>("colour = 1\n").is_err());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.toml");
    std::fs::write(
        &path,
        "[[rule]]\ntool = \"write_file\"\ndecision = \"allow\"\n",
    )
    .unwrap();
    assert_eq!(Policy::load(&path).unwrap().rules.len(), 1);
    assert!(matches!(
        Policy::load(&dir.path().join("missing.toml")),
        Err(PolicyError::Read { .. })
    ));
}
