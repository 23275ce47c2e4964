use super::*;

#[test]
fn a_directory_is_sqlite_and_a_url_is_postgres() {
    assert_eq!(
        StoreSpec::parse("./records").unwrap(),
        StoreSpec::Sqlite(PathBuf::from("./records"))
    );
    for url in [
        "postgres://u@127.0.0.1:5432/db",
        "postgresql://u@127.0.0.1/db",
        "POSTGRES://u@localhost/db",
    ] {
        assert!(StoreSpec::parse(url).unwrap().is_postgres(), "{url}");
    }
    assert!(StoreSpec::parse("").is_err());
}

#[test]
fn the_password_never_shows() {
    let spec = StoreSpec::parse(
        "postgres://alice:s3cr3t-pw@127.0.0.1:5432/db?password=other-pw&application_name=x",
    )
    .unwrap();
    for shown in [
        spec.to_string(),
        format!("{spec:?}"),
        display_records(Path::new(
            "postgres://alice:s3cr3t-pw@127.0.0.1:5432/db?password=other-pw&application_name=x",
        )),
    ] {
        assert!(!shown.contains("s3cr3t-pw"), "{shown}");
        assert!(!shown.contains("other-pw"), "{shown}");
        assert!(
            shown.contains("alice") && shown.contains("127.0.0.1"),
            "{shown}"
        );
    }
    let StoreSpec::Postgres(url) = spec else {
        panic!("a URL")
    };
    assert!(url.expose().contains("s3cr3t-pw"));
}

#[test]
fn a_bad_url_is_an_error_that_does_not_repeat_it() {
    for bad in [
        "postgres://al:pw-secret@[::1/db",
        "postgres://al:pw-secret@host:notaport/db",
    ] {
        let error = StoreSpec::parse(bad).unwrap_err().to_string();
        assert!(!error.contains("pw-secret"), "{error}");
        assert!(display_records(Path::new(bad)).contains("invalid"));
    }
    let long = format!("postgres://u@h/{}", "d".repeat(MAX_URL_BYTES));
    assert!(matches!(
        StoreSpec::parse(&long),
        Err(StoreError::InvalidSpec(_))
    ));
}

#[test]
fn only_a_directory_is_a_local_records_dir() {
    assert_eq!(
        local_records_dir(Path::new("./records")),
        Some(Path::new("./records"))
    );
    assert_eq!(local_records_dir(Path::new("postgres://u@h/db")), None);
}
