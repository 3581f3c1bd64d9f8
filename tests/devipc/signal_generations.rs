//! Signals with generations, with real processes on both emulated backends (HIP as 7.1,
//! whose IPC-event stream wait is on the device, and as 6.2, whose wait blocks the
//! host): a producer writes a shared buffer on its stream and posts; a consumer waits for
//! the generation on its stream and copies the buffer out. The producer holds its stream
//! (the emulator's hook: as if a long kernel ran first), so the consumer's copy provably
//! waits on the device for the producer's work. Each generation is its own (no collapse of
//! two posts into one), a post more than the ring ahead of the consumer's waits waits for
//! them, and `kill -9` of either side ends the other's waits with a timeout, never a hang.

use std::time::Duration;

use devipc::{BackendKind, Error, ExportOptions, Request, Runtime, Signal, SignalToken, Stream};
use devipc_core::token::SignalTokenParts;
use devipc_testkit::{Child, Parent, TestRoot, child_entry};

const KIND_ENV: &str = "GENERATIONS_TEST_KIND";
const LEN: usize = 256 << 10;

fn pattern(seed: u64) -> Vec<u8> {
    (0..LEN as u64)
        .map(|i| (i.wrapping_mul(7) ^ seed.wrapping_mul(0x9e37)) as u8)
        .collect()
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn outcome(r: devipc::Result<()>) -> String {
    match r {
        Ok(()) => "ok".into(),
        Err(e) => e.kind().to_owned(),
    }
}

#[test]
fn child_role() {
    devipc_testkit::run_child(|role, parent| {
        let kind: BackendKind = std::env::var(KIND_ENV)
            .map_err(text)?
            .parse()
            .map_err(|e: Error| e.to_string())?;
        let rt = Runtime::emulated(kind).map_err(text)?;
        match role {
            "producer" => producer(&rt, parent),
            "consumer" => consumer(&rt, parent),
            other => Err(format!("unknown role {other}")),
        }
        .map_err(|e| format!("{role}: {e}"))
    });
}

/// Makes the signal and a buffer and exports both; then `hold` / `release` its stream,
/// `post SEED MS` (write the seed's pattern on the stream, then post with a limit of MS
/// milliseconds: answers the generation or the error kind), `gens`.
fn producer(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let signal = rt.create_signal(0).map_err(text)?;
    let buf = rt.allocate(0, LEN).map_err(text)?;
    let stream = rt.create_stream(0).map_err(text)?;
    parent.say(
        "signal",
        &signal
            .export(ExportOptions::any_process())
            .map_err(text)?
            .to_text(),
    );
    parent.say(
        "buffer",
        &buf.export(ExportOptions::any_process())
            .map_err(text)?
            .to_text(),
    );
    // A second signal, whose token the consumer mixes with the first's.
    let mut other = Some(rt.create_signal(0).map_err(text)?);
    parent.say(
        "other",
        &other
            .as_ref()
            .ok_or("no other signal")?
            .export(ExportOptions::any_process())
            .map_err(text)?
            .to_text(),
    );
    let mut writes: Vec<Request> = Vec::new();
    loop {
        let line = parent.hear();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["hold"] => hold(&stream, true, parent)?,
            ["release"] => hold(&stream, false, parent)?,
            ["post", seed, ms] => {
                let seed: u64 = seed.parse().map_err(text)?;
                let ms: u64 = ms.parse().map_err(text)?;
                writes.push(
                    stream
                        .write(&buf.span(0..LEN).map_err(text)?, pattern(seed))
                        .map_err(text)?,
                );
                match signal.post(&stream, Some(Duration::from_millis(ms))) {
                    Ok(g) => parent.say("posted", &g.to_string()),
                    Err(e) => parent.say("posted", e.kind()),
                }
            }
            ["gens"] => gens(&signal, parent)?,
            ["drop-other"] => {
                drop(other.take());
                parent.say("dropped", "");
            }
            ["exit"] => return Ok(()),
            _ => return Err(format!("unknown command {line}")),
        }
    }
}

fn hold(stream: &Stream, on: bool, parent: &Parent) -> Result<(), String> {
    if on {
        devipc::testing::hold_stream(stream).map_err(text)?;
        parent.say("held", "");
    } else {
        devipc::testing::release_stream(stream).map_err(text)?;
        parent.say("released", "");
    }
    Ok(())
}

fn gens(signal: &Signal, parent: &Parent) -> Result<(), String> {
    let g = signal.generations().map_err(text)?;
    parent.say("gens", &format!("{} {}", g.posted, g.waited));
    Ok(())
}

/// Imports the signal and the buffer; then `wait G MS` (the stream waits for generation
/// G, the host at most MS milliseconds; then the import is copied into slot `G % 4` of a
/// local buffer as a request), `pending G` (whether that copy is still running), `check
/// G SEED` (waits for the copy; its bytes against the seed's pattern), `gens`.
fn consumer(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let token: SignalToken = parent.hear().parse().map_err(|e: Error| e.to_string())?;
    let signal = rt.import_signal(&token, 0).map_err(text)?;
    let import = rt
        .import(&parent.hear().parse().map_err(|e: Error| e.to_string())?, 0)
        .map_err(text)?;
    let stream = rt.create_stream(0).map_err(text)?;
    let local = rt.allocate(0, 4 * LEN).map_err(text)?;
    let mut copies: Vec<Option<Request>> = (0..4).map(|_| None).collect();
    loop {
        let line = parent.hear();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["wait", g, ms] => {
                let g: u64 = g.parse().map_err(text)?;
                let ms: u64 = ms.parse().map_err(text)?;
                let waited = signal.wait_for(&stream, g, Some(Duration::from_millis(ms)));
                let ok = waited.is_ok();
                parent.say("waited", &outcome(waited));
                if ok {
                    let slot = (g % 4) as usize;
                    let dst = local.span(slot * LEN..(slot + 1) * LEN).map_err(text)?;
                    copies[slot] = Some(
                        stream
                            .copy(&dst, &import.span(0..LEN).map_err(text)?)
                            .map_err(text)?,
                    );
                }
            }
            ["pending", g] => {
                let slot = g.parse::<usize>().map_err(text)? % 4;
                let request = copies[slot].as_mut().ok_or("no copy")?;
                let done = request.is_complete().map_err(text)?;
                parent.say("pending", if done { "no" } else { "yes" });
            }
            ["check", g, seed] => {
                let slot = g.parse::<usize>().map_err(text)? % 4;
                let mut request = copies[slot].take().ok_or("no copy")?;
                let waited = request.wait(Some(Duration::from_secs(2)));
                if waited.is_err() {
                    parent.say("bytes", &outcome(waited));
                    // Left to the drainer: dropping never blocks.
                    drop(request);
                    continue;
                }
                let mut got = vec![0u8; LEN];
                local.read(slot * LEN, &mut got).map_err(text)?;
                let want = pattern(seed.parse().map_err(text)?);
                parent.say("bytes", if got == want { "ok" } else { "wrong" });
            }
            ["gens"] => gens(&signal, parent)?,
            ["mix", other] => {
                // This signal's vendor object with the other signal's word file.
                let other: SignalToken = other.parse().map_err(|e: Error| e.to_string())?;
                let name_at = other.payload().len() - 32;
                let mut payload = token.payload()[..name_at].to_vec();
                payload.extend_from_slice(&other.payload()[name_at..]);
                let mixed = SignalToken::new(SignalTokenParts {
                    mechanism: token.mechanism(),
                    emulated: token.emulated(),
                    device: token.device(),
                    physical: *token.physical_device(),
                    origin: token.origin(),
                    generation: token.generation(),
                    payload,
                })
                .map_err(text)?;
                let got = rt.import_signal(&mixed, 0).map(|_| ());
                parent.say("mixed", &outcome(got));
            }
            ["import", token] => {
                let token: SignalToken = token.parse().map_err(|e: Error| e.to_string())?;
                let got = rt.import_signal(&token, 0).map(|_| ());
                parent.say("imported", &outcome(got));
            }
            ["exit"] => return Ok(()),
            _ => return Err(format!("unknown command {line}")),
        }
    }
}

/// The emulated runtimes: Ascend, HIP 7.1 (stream waits on the device), HIP 6.2 (stream
/// waits on IPC events block the host).
const TARGETS: [(BackendKind, &str); 3] = [
    (BackendKind::Ascend, ""),
    (BackendKind::Hip, "7.1"),
    (BackendKind::Hip, "6.2"),
];

fn spawn(root: &TestRoot, role: &str, kind: BackendKind, version: &str) -> Child {
    let mut b = Child::build(&child_entry(), role, root).env(KIND_ENV, kind.name());
    if !version.is_empty() {
        b = b.env("DEVIPC_EMU_HIP_VERSION", version);
    }
    b.spawn()
}

fn start(root: &TestRoot, kind: BackendKind, version: &str) -> (Child, Child) {
    let mut producer = spawn(root, "producer", kind, version);
    let mut consumer = spawn(root, "consumer", kind, version);
    consumer.send(&producer.expect("signal"));
    consumer.send(&producer.expect("buffer"));
    producer.expect("other");
    (producer, consumer)
}

fn finish(root: &TestRoot, children: Vec<Child>) {
    for mut c in children {
        c.send("exit");
        c.wait_success();
    }
    assert_eq!(root.recorded_violations(), Vec::<String>::new());
    root.assert_emulator_clean();
}

/// Whether a stream wait on an IPC event blocks the host (HIP before 7.0).
fn host_blocking(kind: BackendKind, version: &str) -> bool {
    kind == BackendKind::Hip && version.starts_with('6')
}

#[test]
fn a_wait_orders_the_consumers_copy_after_the_producers_write() {
    for (kind, version) in TARGETS {
        let label = format!("{kind} {version}");
        let root = TestRoot::new(&format!("generations-order-{kind}{version}"));
        let (mut producer, mut consumer) = start(&root, kind, version);
        producer.send("hold");
        producer.expect("held");
        producer.send("post 1 5000");
        assert_eq!(producer.expect("posted"), "1", "{label}");
        if host_blocking(kind, version) {
            // The vendor's stream wait would block the consumer's thread until the held
            // write ran: devipc waits for the record itself first, within the timeout.
            consumer.send("wait 1 100");
            assert_eq!(consumer.expect("waited"), "timeout", "{label}");
            producer.send("release");
            producer.expect("released");
            consumer.send("wait 1 10000");
            assert_eq!(consumer.expect("waited"), "ok", "{label}");
        } else {
            consumer.send("wait 1 10000");
            assert_eq!(consumer.expect("waited"), "ok", "{label}: returns at once");
            std::thread::sleep(Duration::from_millis(100));
            consumer.send("pending 1");
            assert_eq!(
                consumer.expect("pending"),
                "yes",
                "{label}: the copy waits on the device for the held write"
            );
            producer.send("release");
            producer.expect("released");
        }
        consumer.send("check 1 1");
        assert_eq!(consumer.expect("bytes"), "ok", "{label}");
        consumer.send("gens");
        assert_eq!(consumer.expect("gens"), "1 1", "{label}");
        finish(&root, vec![consumer, producer]);
    }
}

#[test]
fn each_generation_is_its_own_and_a_later_one_is_not_posted_early() {
    for (kind, version) in TARGETS {
        let label = format!("{kind} {version}");
        let root = TestRoot::new(&format!("generations-each-{kind}{version}"));
        let (mut producer, mut consumer) = start(&root, kind, version);
        // Two posts before any wait: a binary semaphore would collapse them into one.
        for g in 1..=2 {
            producer.send(&format!("post {g} 5000"));
            assert_eq!(producer.expect("posted"), g.to_string(), "{label}");
        }
        for g in 1..=2 {
            consumer.send(&format!("wait {g} 10000"));
            assert_eq!(consumer.expect("waited"), "ok", "{label}: generation {g}");
        }
        // The copy after generation 2's wait sees generation 2's write.
        consumer.send("check 2 2");
        assert_eq!(consumer.expect("bytes"), "ok", "{label}");
        consumer.send("wait 3 200");
        assert_eq!(
            consumer.expect("waited"),
            "timeout",
            "{label}: generation 3 was never posted"
        );
        finish(&root, vec![consumer, producer]);
    }
}

#[test]
fn a_post_a_ring_ahead_of_the_waits_waits_for_the_consumer() {
    for (kind, version) in TARGETS {
        let label = format!("{kind} {version}");
        let root = TestRoot::new(&format!("generations-ring-{kind}{version}"));
        let (mut producer, mut consumer) = start(&root, kind, version);
        for g in 1..=4 {
            producer.send(&format!("post {g} 5000"));
            assert_eq!(producer.expect("posted"), g.to_string(), "{label}");
        }
        producer.send("post 5 200");
        assert_eq!(
            producer.expect("posted"),
            "timeout",
            "{label}: the fifth post would take generation 1's slot before its wait"
        );
        consumer.send("wait 1 10000");
        assert_eq!(consumer.expect("waited"), "ok", "{label}");
        producer.send("post 5 5000");
        assert_eq!(producer.expect("posted"), "5", "{label}");
        consumer.send("wait 5 10000");
        assert_eq!(consumer.expect("waited"), "ok", "{label}");
        consumer.send("check 5 5");
        assert_eq!(consumer.expect("bytes"), "ok", "{label}");
        producer.send("gens");
        assert_eq!(producer.expect("gens"), "5 5", "{label}");
        finish(&root, vec![consumer, producer]);
    }
}

#[test]
fn kill_9_of_either_side_ends_the_others_waits_with_a_timeout() {
    for (kind, version) in TARGETS {
        let label = format!("{kind} {version}");
        // The producer dies with generation 1 posted but its write held: the consumer's
        // copy waits for a record that never completes; the host calls time out.
        let root = TestRoot::new(&format!("generations-kill-producer-{kind}{version}"));
        let (mut producer, mut consumer) = start(&root, kind, version);
        producer.send("post 1 5000");
        assert_eq!(producer.expect("posted"), "1", "{label}");
        consumer.send("wait 1 10000");
        assert_eq!(consumer.expect("waited"), "ok", "{label}");
        consumer.send("check 1 1");
        assert_eq!(consumer.expect("bytes"), "ok", "{label}");
        producer.kill();
        consumer.send("wait 2 300");
        assert_eq!(consumer.expect("waited"), "timeout", "{label}");
        consumer.send("exit");
        consumer.wait_success();

        // The consumer dies: the producer's posts a ring ahead time out.
        let root = TestRoot::new(&format!("generations-kill-consumer-{kind}{version}"));
        let (mut producer, consumer) = start(&root, kind, version);
        consumer.kill();
        for g in 1..=4 {
            producer.send(&format!("post {g} 5000"));
            assert_eq!(producer.expect("posted"), g.to_string(), "{label}");
        }
        producer.send("post 5 300");
        assert_eq!(producer.expect("posted"), "timeout", "{label}");
        producer.send("exit");
        producer.wait_success();
    }
}

#[test]
fn a_wait_for_a_dead_producers_pending_record_ends_at_its_timeout() {
    for (kind, version) in TARGETS {
        let label = format!("{kind} {version}");
        let root = TestRoot::new(&format!("generations-dead-record-{kind}{version}"));
        let (mut producer, mut consumer) = start(&root, kind, version);
        // A first generation, so the consumer has opened the ring's events.
        producer.send("post 1 5000");
        assert_eq!(producer.expect("posted"), "1", "{label}");
        consumer.send("wait 1 10000");
        assert_eq!(consumer.expect("waited"), "ok", "{label}");
        producer.send("hold");
        producer.expect("held");
        producer.send("post 2 5000");
        assert_eq!(producer.expect("posted"), "2", "{label}");
        // The record of generation 2 never completes: its stream died with the producer.
        producer.kill();
        let started = std::time::Instant::now();
        consumer.send("wait 2 500");
        let waited = consumer.expect("waited");
        let took = started.elapsed();
        if host_blocking(kind, version) {
            // The vendor's stream wait would block for good: devipc waits for the record
            // itself, within the timeout.
            assert_eq!(waited, "timeout", "{label}");
        } else {
            assert_eq!(waited, "ok", "{label}: the wait is on the device");
            std::thread::sleep(Duration::from_millis(200));
            consumer.send("pending 2");
            assert_eq!(
                consumer.expect("pending"),
                "yes",
                "{label}: the copy waits on"
            );
        }
        assert!(took < Duration::from_secs(5), "{label}: {took:?}");
        consumer.send("exit");
        consumer.wait_success();
    }
}

#[test]
fn a_token_mixing_two_signals_is_refused() {
    for (kind, version) in TARGETS {
        let label = format!("{kind} {version}");
        let root = TestRoot::new(&format!("generations-mixed-{kind}{version}"));
        let mut producer = spawn(&root, "producer", kind, version);
        let mut consumer = spawn(&root, "consumer", kind, version);
        consumer.send(&producer.expect("signal"));
        consumer.send(&producer.expect("buffer"));
        let other = producer.expect("other");
        consumer.send(&format!("mix {other}"));
        assert_eq!(consumer.expect("mixed"), "invalid_token", "{label}");
        finish(&root, vec![consumer, producer]);
    }
}

#[test]
fn a_signal_token_replayed_after_its_signal_was_destroyed_is_refused() {
    for (kind, version) in TARGETS {
        let label = format!("{kind} {version}");
        let root = TestRoot::new(&format!("generations-replay-{kind}{version}"));
        let (producer, mut consumer) = start(&root, kind, version);
        let gone = producer_other_token(&root, kind, version);
        consumer.send(&format!("import {gone}"));
        let got = consumer.expect("imported");
        // The word file (HIP) / the ring (Ascend) went with the signal: "gone", typed.
        assert_eq!(got, "invalid_argument", "{label}");
        finish(&root, vec![consumer, producer]);
    }
}

/// The `other` token of a producer that then destroyed that signal and exited.
fn producer_other_token(root: &TestRoot, kind: BackendKind, version: &str) -> String {
    let mut p = spawn(root, "producer", kind, version);
    p.expect("signal");
    p.expect("buffer");
    let token = p.expect("other");
    p.send("drop-other");
    p.expect("dropped");
    p.send("exit");
    p.wait_success();
    token
}

#[test]
fn two_runtimes_of_one_process_post_and_wait_on_one_signal() {
    for kind in [BackendKind::Ascend, BackendKind::Hip] {
        let a = Runtime::emulated(kind).unwrap();
        let b = Runtime::emulated(kind).unwrap();
        let signal = a.create_signal(0).unwrap();
        let token = signal.export(ExportOptions::any_process()).unwrap();
        let through_b = b.import_signal(&token, 0).unwrap();
        let (sa, sb) = (a.create_stream(0).unwrap(), b.create_stream(0).unwrap());
        let limit = Some(Duration::from_secs(10));
        let g = signal.post(&sa, limit).unwrap();
        through_b.wait_for(&sb, g, limit).unwrap();
        let g2 = through_b.post(&sb, limit).unwrap();
        assert_eq!(g2, g + 1, "{kind}: one generation counter");
        signal.wait_for(&sa, g2, limit).unwrap();
        drop(signal);
        // The import keeps the shared signal after the first runtime's handle is gone.
        let g3 = through_b.post(&sb, limit).unwrap();
        through_b.wait_for(&sb, g3, limit).unwrap();
        sb.synchronize().unwrap();
        assert_eq!(through_b.generations().unwrap().posted, 3, "{kind}");
    }
}
