use super::*;
use crate::settings::{OutputMode, ProtocolArg};

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("run.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn config_file_fills_in_and_flags_win() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().display().to_string();
    let config = write_config(
        dir.path(),
        &format!(
            "workdir = \"{ws}\"\nprompt = \"from file\"\nupstream_url = \"http://127.0.0.1:8000/v1\"\n\
             upstream_model = \"file-model\"\nmax_turns = 3\noutput = \"jsonl\"\napproval_mode = \"yolo\"\n\
             [translation]\nprofile = \"llama.cpp\"\necho_reasoning = true\n\
             [timeouts]\nfirst_token_ms = 300000\n[retries]\nupstream_attempts = 5\n"
        ),
    );
    let args = RunSettings {
        config: Some(config),
        prompt: vec!["from flag".into()],
        echo_reasoning: Some(false),
        ..Default::default()
    };
    let r = args.resolve().unwrap();
    assert_eq!(r.prompts, ["from flag"]);
    assert_eq!(r.max_turns, Some(3));
    assert_eq!(r.output, OutputMode::Jsonl);
    assert_eq!(r.approval_mode, ApprovalMode::Yolo);
    let Target::Gateway {
        upstream_model,
        key_env,
        translation,
        timeouts,
        retries,
        ..
    } = r.target
    else {
        panic!("gateway target")
    };
    assert_eq!(upstream_model, "file-model");
    assert_eq!(key_env, DEFAULT_KEY_ENV);
    assert!(
        translation.forward_top_k,
        "the llama.cpp profile forwards top_k"
    );
    assert_eq!(translation.profile, switchyard_translate::Profile::LlamaCpp);
    assert!(!translation.echo_reasoning, "the flag wins over the file");
    assert_eq!(timeouts.first_token_ms, 300_000);
    assert_eq!(timeouts.idle_ms, TimeoutConfig::default().idle_ms);
    assert_eq!(retries.upstream_attempts, 5);
}

#[test]
fn unknown_config_keys_such_as_a_literal_key_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write_config(dir.path(), "upstream_key = \"sk-should-not-be-here\"\n");
    let err = RunSettings {
        config: Some(bad),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(format!("{err:#}").contains("upstream_key"), "{err:#}");
}

#[test]
fn missing_or_bad_settings_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let base = || RunSettings {
        workdir: Some(dir.path().to_path_buf()),
        prompt: vec!["p".into()],
        upstream_url: Some("http://127.0.0.1:1/v1".into()),
        upstream_model: Some("m".into()),
        ..Default::default()
    };
    assert!(base().resolve().is_ok());
    let e = RunSettings {
        workdir: None,
        ..base()
    }
    .resolve()
    .unwrap_err();
    assert!(e.to_string().contains("--workdir"));
    let e = RunSettings {
        upstream_url: Some("ftp://x".into()),
        ..base()
    }
    .resolve()
    .unwrap_err();
    assert!(e.to_string().contains("not an http(s) URL"));
    let e = RunSettings {
        upstream_key_env: Some("sk-123 456".into()),
        ..base()
    }
    .resolve()
    .unwrap_err();
    assert!(e.to_string().contains("must name an environment variable"));
    let e = RunSettings {
        guest_base_url: Some("http://10.0.0.1:80".into()),
        ..base()
    }
    .resolve()
    .unwrap_err();
    assert!(e.to_string().contains("loopback"));
    let e = RunSettings {
        prompt: vec!["  ".into()],
        ..base()
    }
    .resolve()
    .unwrap_err();
    assert!(e.to_string().contains("empty"));
}

#[test]
fn session_flags_need_acp_and_resume_needs_a_recorded_session() {
    let dir = tempfile::tempdir().unwrap();
    let base = || RunSettings {
        workdir: Some(dir.path().to_path_buf()),
        prompt: vec!["p".into()],
        upstream_url: Some("http://127.0.0.1:1/v1".into()),
        upstream_model: Some("m".into()),
        ..Default::default()
    };
    let acp = || RunSettings {
        protocol: Some(ProtocolArg::Acp),
        ..base()
    };
    let refused = |args: RunSettings| format!("{:#}", args.resolve().unwrap_err());
    let two = RunSettings {
        prompt: vec!["a".into(), "b".into()],
        ..base()
    };
    assert!(refused(two).contains("several prompts need --protocol acp"));
    let stdin = RunSettings {
        prompts_stdin: true,
        ..base()
    };
    assert!(refused(stdin).contains("--prompts-stdin needs --protocol acp"));
    let policy = dir.path().join("p.toml");
    std::fs::write(
        &policy,
        "[[rule]]\ncategory = \"shell\"\ndecision = \"allow\"\n",
    )
    .unwrap();
    let headless_policy = RunSettings {
        permissions: Some(policy.clone()),
        ..base()
    };
    assert!(refused(headless_policy).contains("--permissions needs --protocol acp"));
    let bad_policy = RunSettings {
        permissions: Some(policy),
        ..acp()
    };
    assert!(refused(bad_policy).contains("unknown category"));
    // Prompts may come from stdin alone.
    let only_stdin = RunSettings {
        prompt: Vec::new(),
        prompts_stdin: true,
        ..acp()
    };
    assert!(only_stdin.resolve().unwrap().prompts.is_empty());
    let resume = |records: Option<PathBuf>, protocol| RunSettings {
        resume: Some("0123".into()),
        records,
        protocol,
        ..base()
    };
    assert!(
        refused(resume(None, Some(ProtocolArg::Headless)))
            .contains("--resume needs --protocol acp")
    );
    assert!(refused(resume(None, Some(ProtocolArg::Acp))).contains("--resume needs --records"));
    // A store without that run.
    let records = tempfile::tempdir().unwrap();
    switchyard_records::SqliteStore::open(switchyard_records::store_path(records.path())).unwrap();
    let missing = refused(resume(
        Some(records.path().to_path_buf()),
        Some(ProtocolArg::Acp),
    ));
    assert!(missing.contains("0123"), "{missing}");
}

#[test]
fn a_bad_tools_file_or_finish_schema_is_a_clear_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let base = |tools: Option<PathBuf>, finish: Option<PathBuf>| RunSettings {
        workdir: Some(dir.path().to_path_buf()),
        prompt: vec!["p".into()],
        upstream_url: Some("http://127.0.0.1:1/v1".into()),
        upstream_model: Some("m".into()),
        tools,
        finish_schema: finish,
        ..Default::default()
    };
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        "[[tool]]\nname = \"record\"\ndescription = \"d\"\ninput_schema = { type = \"object\" }\n",
    )
    .unwrap();
    let e = base(Some(tools.clone()), None).resolve().unwrap_err();
    assert!(format!("{e:#}").contains("command or url"), "{e:#}");
    let schema = dir.path().join("finish.json");
    std::fs::write(&schema, "{\"type\": \"object\"").unwrap();
    let e = base(None, Some(schema.clone())).resolve().unwrap_err();
    assert!(format!("{e:#}").contains("not JSON"), "{e:#}");
    std::fs::write(&schema, "{\"type\": \"string\"}").unwrap();
    let e = base(None, Some(schema.clone())).resolve().unwrap_err();
    assert!(format!("{e:#}").contains("object"), "{e:#}");
    std::fs::write(&schema, "{\"type\": \"object\"}").unwrap();
    assert!(base(None, Some(schema.clone())).resolve().is_ok());
    let e = RunSettings {
        guest_base_url: Some("http://127.0.0.1:9".into()),
        ..base(None, Some(schema))
    }
    .resolve()
    .unwrap_err();
    assert!(e.to_string().contains("need the gateway"), "{e:#}");
}

#[test]
fn only_real_loopback_hosts_pass_the_loopback_check() {
    for ok in [
        "http://127.0.0.1:80",
        "http://localhost:9/v1",
        "http://[::1]:8080",
        "http://127.3.4.5",
    ] {
        assert!(check_loopback_url(ok).is_ok(), "{ok}");
    }
    for bad in [
        "http://127.0.0.1.evil.example:80",
        "http://localhost.example",
        "http://[::2]:1",
        "http://10.0.0.1",
    ] {
        assert!(check_loopback_url(bad).is_err(), "{bad}");
    }
}
