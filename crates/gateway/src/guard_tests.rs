use super::*;

fn loopback() -> HostGuard {
    HostGuard::new("127.0.0.1:8080".parse().unwrap(), &[], &[])
}

#[test]
fn loopback_names_and_literals_are_hosts_of_ours() {
    let guard = loopback();
    for host in [
        "127.0.0.1",
        "127.0.0.1:8080",
        "127.1.2.3:9",
        "localhost",
        "LOCALHOST:1",
        "[::1]",
        "[::1]:443",
    ] {
        assert!(guard.host_allowed(host), "{host}");
    }
}

#[test]
fn foreign_and_malformed_hosts_are_refused() {
    let guard = loopback();
    for host in [
        "evil.example",
        "evil.example:8080",
        "localhost.evil.example",
        "127.0.0.1.evil.example",
        "10.0.0.1",
        "",
        "user@127.0.0.1",
        "127.0.0.1 evil",
        "[::1",
    ] {
        assert!(!guard.host_allowed(host), "{host}");
    }
}

#[test]
fn configured_names_and_the_listen_address_are_allowed() {
    let guard = HostGuard::new(
        "192.0.2.7:9000".parse().unwrap(),
        &["Gateway.Internal".into()],
        &[],
    );
    assert!(guard.host_allowed("192.0.2.7:9000"));
    assert!(guard.host_allowed("gateway.internal"));
    assert!(!guard.host_allowed("other.internal"));
    let any = HostGuard::new("0.0.0.0:1".parse().unwrap(), &[], &[]);
    assert!(
        !any.host_allowed("0.0.0.0"),
        "the unspecified address names nobody"
    );
}

#[test]
fn an_origin_is_the_gateways_own_scheme_host_and_port() {
    let guard = loopback();
    assert!(guard.origin_allowed("http://127.0.0.1:8080"));
    assert!(guard.origin_allowed("http://localhost:8080"));
    assert!(guard.origin_allowed("http://[::1]:8080/"));
    for origin in [
        "http://127.0.0.1:3000",
        "http://localhost",
        "https://127.0.0.1:8080",
        "http://evil.example:8080",
        "null",
        "file://",
        "chrome-extension://abc",
        "http://user@127.0.0.1:8080",
        "http://127.0.0.1:8080/page",
        "",
    ] {
        assert!(!guard.origin_allowed(origin), "{origin}");
    }
}

#[test]
fn configured_origins_match_scheme_host_and_port() {
    let guard = HostGuard::new(
        "127.0.0.1:8080".parse().unwrap(),
        &[],
        &[
            "https://Gateway.Example".into(),
            "http://10.0.0.5:9000".into(),
        ],
    );
    assert!(guard.origin_allowed("https://gateway.example"));
    assert!(guard.origin_allowed("https://gateway.example:443"));
    assert!(guard.origin_allowed("http://10.0.0.5:9000"));
    assert!(!guard.origin_allowed("http://gateway.example"));
    assert!(!guard.origin_allowed("http://10.0.0.5:9001"));
    assert_eq!(parse_origin("https://x.example/path"), None);
    assert_eq!(parse_origin("ftp://x.example"), None);
}
