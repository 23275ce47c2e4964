use tokio::sync::mpsc;

use super::*;

fn intake(budget: u32, own: usize, max_body: usize) -> Intake {
    Intake {
        budget: BodyBudget::new(budget),
        own,
        max_body,
        stall: Duration::from_millis(200),
        deadline: Duration::from_secs(2),
    }
}

fn body_of(pieces: &[&'static [u8]]) -> Body {
    let pieces: Vec<Result<Bytes, std::io::Error>> =
        pieces.iter().map(|p| Ok(Bytes::from_static(p))).collect();
    Body::from_stream(futures_util::stream::iter(pieces))
}

/// A body whose pieces the test sends when it likes; it ends when the sender is dropped.
fn body_fed() -> (mpsc::UnboundedSender<&'static [u8]>, Body) {
    let (tx, rx) = mpsc::unbounded_channel::<&'static [u8]>();
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let piece = rx.recv().await?;
        Some((Ok::<_, std::io::Error>(Bytes::from_static(piece)), rx))
    });
    (tx, Body::from_stream(stream))
}

/// Lets spawned readers run until they wait.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(30)).await;
}

#[tokio::test]
async fn pieces_are_joined_and_only_bytes_past_the_own_bound_are_charged() {
    let intake = intake(100, 3, 1_000);
    let GuestBody { bytes, permit } = intake
        .read(body_of(&[b"{\"a\"", b":1", b"}"]), Some(7))
        .await
        .unwrap();
    assert_eq!(&bytes[..], b"{\"a\":1}");
    assert_eq!(intake.budget.available(), 96, "7 bytes, 3 on the own bound");
    drop(permit);
    assert_eq!(intake.budget.available(), 100);
    let GuestBody { permit, .. } = intake.read(body_of(&[b"ab"]), None).await.unwrap();
    assert_eq!(intake.budget.available(), 100, "within the own bound");
    drop(permit);
}

#[tokio::test]
async fn a_dripping_body_holds_only_what_it_sent_whatever_it_declared() {
    let intake = intake(100, 0, 1_000);
    let (tx, body) = body_fed();
    let reader = tokio::spawn({
        let intake = intake.clone();
        async move { intake.read(body, Some(900)).await }
    });
    tx.send(b"12345").unwrap();
    settle().await;
    assert_eq!(intake.budget.available(), 95, "5 bytes sent, 900 declared");
    tx.send(b"678").unwrap();
    settle().await;
    assert_eq!(intake.budget.available(), 92);
    drop(tx);
    let GuestBody { bytes, permit } = reader.await.unwrap().unwrap();
    assert_eq!(&bytes[..], b"12345678");
    drop(permit);
    assert_eq!(intake.budget.available(), 100);
}

#[tokio::test]
async fn a_larger_body_than_the_budget_is_read_alone() {
    let intake = intake(100, 0, 1_000);
    let GuestBody { bytes, permit } = intake.read(body_of(&[&[b'y'; 300]]), None).await.unwrap();
    assert_eq!(bytes.len(), 300);
    assert_eq!(intake.budget.available(), 0);
    drop(permit);
    assert_eq!(intake.budget.available(), 100);
}

#[tokio::test]
async fn a_reader_waits_without_holding_so_two_large_bodies_both_finish() {
    // Both bodies are larger than half the budget and arrive interleaved. Had each kept its
    // charge while waiting for more, they would wait for each other until the deadline.
    let intake = intake(10, 0, 1_000);
    let (tx_a, a) = body_fed();
    let (tx_b, b) = body_fed();
    let read = |body| {
        let intake = intake.clone();
        tokio::spawn(async move { intake.read(body, None).await })
    };
    let (a, b) = (read(a), read(b));
    tx_a.send(b"aaaaaa").unwrap();
    settle().await;
    tx_b.send(b"bbbb").unwrap();
    settle().await;
    assert_eq!(intake.budget.available(), 0);
    tx_a.send(b"aa").unwrap(); // a needs 8 of 10 with b holding 4: a gives its 6 back, waits
    settle().await;
    tx_b.send(b"bb").unwrap(); // b needs 6: it waits too, in line behind a
    drop((tx_a, tx_b));
    // The budget serves a first (it was first in line); b follows once a's charge is dropped.
    // Readers that kept their charge while waiting would both be stuck until the deadline (2 s).
    let a = tokio::time::timeout(Duration::from_secs(1), a)
        .await
        .expect("a is served")
        .unwrap()
        .unwrap();
    assert_eq!(&a.bytes[..], b"aaaaaaaa");
    assert!(!b.is_finished(), "b waits while a's charge is held");
    drop(a);
    let b = tokio::time::timeout(Duration::from_secs(1), b)
        .await
        .expect("b is served")
        .unwrap()
        .unwrap();
    assert_eq!(&b.bytes[..], b"bbbbbb");
    drop(b);
    assert_eq!(intake.budget.available(), 10);
}

#[tokio::test]
async fn too_large_bodies_are_refused_declared_or_chunked() {
    let intake = intake(100, 0, 5);
    assert_eq!(
        intake
            .read(body_of(&[b"123456"]), Some(6))
            .await
            .unwrap_err(),
        IntakeError::TooLarge { size: 6, limit: 5 }
    );
    assert_eq!(
        intake
            .read(body_of(&[b"123", b"456"]), None)
            .await
            .unwrap_err(),
        IntakeError::TooLarge { size: 6, limit: 5 }
    );
    assert_eq!(
        intake.budget.available(),
        100,
        "a refused body keeps nothing"
    );
}

#[tokio::test]
async fn a_stalled_body_gives_its_charge_back() {
    let intake = intake(100, 0, 1_000);
    let stalled = futures_util::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"{"))])
        .chain(futures_util::stream::pending());
    let err = intake
        .read(Body::from_stream(stalled), Some(10))
        .await
        .unwrap_err();
    assert_eq!(err, IntakeError::Stalled(Duration::from_millis(200)));
    assert_eq!(err.status(), 408);
    assert_eq!(intake.budget.available(), 100);
}

#[tokio::test]
async fn a_trickling_body_is_cut_off_at_the_whole_body_deadline() {
    let intake = Intake {
        deadline: Duration::from_millis(300),
        ..intake(100, 0, 1_000)
    };
    // One byte every 50 ms: never a stall of 200 ms, but never done either.
    let trickle = futures_util::stream::unfold((), |()| async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Some((Ok::<_, std::io::Error>(Bytes::from_static(b" ")), ()))
    });
    let err = intake
        .read(Body::from_stream(trickle), Some(1_000))
        .await
        .unwrap_err();
    assert_eq!(err, IntakeError::TooSlow(Duration::from_millis(300)));
    assert_eq!(err.status(), 408);
    assert_eq!(intake.budget.available(), 100, "the charge is freed");
}

#[tokio::test]
async fn waiting_for_the_budget_is_not_counted_against_the_sender() {
    let intake = Intake {
        deadline: Duration::from_millis(300),
        ..intake(10, 0, 1_000)
    };
    let GuestBody { permit: held, .. } = intake.read(body_of(&[b"12345678"]), None).await.unwrap();
    let waiting = tokio::spawn({
        let intake = intake.clone();
        async move { intake.read(body_of(&[b"abcd"]), None).await }
    });
    // Longer than the whole-body deadline.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !waiting.is_finished(),
        "4 bytes do not fit while 8 of 10 are charged"
    );
    drop(held);
    let GuestBody { bytes, .. } = waiting.await.unwrap().unwrap();
    assert_eq!(&bytes[..], b"abcd");
}
