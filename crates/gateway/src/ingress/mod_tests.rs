use super::*;

#[tokio::test(flavor = "current_thread")]
async fn a_large_body_is_parsed_off_the_worker_a_small_one_on_it() {
    let worker = std::thread::current().id();
    let small = parse_work(BLOCKING_PARSE_BYTES - 1, || std::thread::current().id()).await;
    assert_eq!(small, Some(worker));
    let large = parse_work(BLOCKING_PARSE_BYTES, || std::thread::current().id()).await;
    assert!(large.is_some_and(|thread| thread != worker));
}

#[tokio::test(flavor = "current_thread")]
async fn the_worker_serves_others_while_a_large_body_is_parsed() {
    let (started, wait) = std::sync::mpsc::channel::<()>();
    let (release, parked) = std::sync::mpsc::channel::<()>();
    let parsing = tokio::spawn(parse_work(BLOCKING_PARSE_BYTES, move || {
        let _ = started.send(());
        // Holds its thread until the test has been served meanwhile.
        parked.recv().is_ok()
    }));
    tokio::task::spawn_blocking(move || wait.recv())
        .await
        .unwrap()
        .unwrap();
    // The single worker thread is free: another task runs to completion.
    assert_eq!(tokio::spawn(async { 7 }).await.unwrap(), 7);
    release.send(()).unwrap();
    assert_eq!(parsing.await.unwrap(), Some(true));
}

#[tokio::test(flavor = "current_thread")]
#[should_panic(expected = "hostile")]
async fn a_panic_while_parsing_off_the_worker_is_not_swallowed() {
    let _ = parse_work(BLOCKING_PARSE_BYTES, || panic!("hostile")).await;
}
