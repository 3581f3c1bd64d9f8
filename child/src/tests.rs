//! Unit tests of the line splitting, the inbox and the stderr tail.

use std::sync::Arc;
use std::time::Duration;

use crate::pipes::*;
use crate::*;

/// Feeds `chunks` and returns what came out, the largest line buffer seen included.
fn split(chunks: &[&[u8]]) -> (Vec<String>, usize) {
    let mut lines = Lines::default();
    let mut out = Vec::new();
    let mut held = 0;
    let mut emit = |item: Item| {
        out.push(match item {
            Item::Message((k, v)) => format!("{k}={v}"),
            Item::TooLong { key } => format!("too long: {key}"),
        });
        true
    };
    for chunk in chunks {
        assert!(lines.feed(chunk, &mut emit));
        held = held.max(lines.line.capacity());
    }
    lines.finish(&mut emit);
    (out, held)
}

#[test]
fn lines_split_across_chunks_and_keep_only_messages() {
    let (out, _) = split(&[
        b"test x ... \n@@ a 1\r\n@@ b tw",
        b"o\\nlines\nnoise @@ fail x\n\n@@ c",
    ]);
    assert_eq!(out, ["a=1", "b=two\nlines", "c="]);
}

#[test]
fn an_overlong_line_is_held_to_max_line() {
    let flood = vec![b'x'; 256 * 1024];
    let mut chunks: Vec<&[u8]> = vec![&flood; 12];
    chunks.push(b"\n@@ after 1\n");
    let (out, held) = split(&chunks);
    assert_eq!(out, ["after=1"]);
    assert!(held <= 2 * MAX_LINE, "held {held} bytes");

    let mut big = b"@@ big ".to_vec();
    big.resize(MAX_LINE + 1, b'y');
    big.extend_from_slice(b"\n@@ small ok\n");
    let (out, _) = split(&[&big]);
    assert_eq!(out, ["too long: big", "small=ok"]);
    // Exactly MAX_LINE bytes is still a message.
    big.truncate(MAX_LINE);
    big.push(b'\n');
    let (out, _) = split(&[&big]);
    assert_eq!(out.len(), 1);
    assert!(out[0].starts_with("big=yyy"), "{}", &out[0][..10]);
}

#[test]
fn the_inbox_holds_back_the_reader_past_its_budget_until_closed() {
    let inbox = Arc::new(Inbox::default());
    let big = || Item::Message(("k".into(), "v".repeat(INBOX_BYTES / 2)));
    assert!(inbox.push(big()));
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = Arc::clone(&inbox);
    std::thread::spawn(move || {
        let _ = tx.send(reader.push(big()) && reader.push(big()));
    });
    // The second big item waits for room; receiving one makes it.
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    assert!(matches!(inbox.pop(Duration::ZERO), Popped::Item(_)));
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    inbox.close();
    assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(false));
}
