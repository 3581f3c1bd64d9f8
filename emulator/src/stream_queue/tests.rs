//! Tests of the stream queues: order, inline work, errors, forced closes, holds, sliced
//! waits and helpers.

use super::*;
use std::sync::atomic::AtomicU32;

type Q = Queue<String>;

fn queue() -> Q {
    Queue::new("test-stream", |m| m)
}

/// An operation that blocks until `gate` is set (or cancelled).
struct Gate(Arc<AtomicBool>, Arc<AtomicU32>);

impl Op<String> for Gate {
    fn try_now(&mut self) -> Option<Result<(), String>> {
        self.0.load(Ordering::Acquire).then(|| {
            self.1.fetch_add(1, Ordering::AcqRel);
            Ok(())
        })
    }

    fn run(self: Box<Self>, cancel: &Cancel) -> Result<(), String> {
        wait_sliced::<String>(Some(cancel), None, |slice| {
            let open = self.0.load(Ordering::Acquire);
            if !open {
                std::thread::sleep(slice.min(Duration::from_millis(5)));
            }
            Ok(open)
        })
        .map_err(|e| format!("{e:?}"))?;
        self.1.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    fn abandon(self: Box<Self>) {
        self.1.fetch_add(100, Ordering::AcqRel);
    }
}

#[test]
fn idle_work_runs_inline_and_errors_wait_for_synchronize() {
    let q = queue();
    let seen = Arc::new(AtomicU32::new(0));
    let s = seen.clone();
    assert_eq!(
        q.submit(quick(move || {
            s.fetch_add(1, Ordering::AcqRel);
            Ok(())
        })),
        Ok(1)
    );
    assert_eq!(
        seen.load(Ordering::Acquire),
        1,
        "ran before submit returned"
    );
    q.submit(quick(|| Err("boom".to_owned()))).unwrap();
    q.submit(quick(|| Ok(()))).unwrap();
    assert_eq!(q.synchronize(None), Some(vec!["boom".to_owned()]));
    assert_eq!(q.synchronize(None), Some(vec![]), "reported once");
    assert!(q.inner.lock().worker.is_none(), "no thread for inline work");
}

#[test]
fn a_wait_blocks_only_its_queue_and_keeps_order() {
    let q = queue();
    let other = queue();
    let gate = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU32::new(0));
    let seq = q
        .submit(Box::new(Gate(gate.clone(), count.clone())))
        .unwrap();
    let after = Arc::new(AtomicU32::new(0));
    let a = after.clone();
    let c = count.clone();
    q.submit(quick(move || {
        // Runs after the gate opened.
        a.store(c.load(Ordering::Acquire) + 10, Ordering::Release);
        Ok(())
    }))
    .unwrap();
    assert!(!q.is_done(seq));
    // Another queue is not blocked.
    other.submit(quick(|| Ok(()))).unwrap();
    assert_eq!(other.synchronize(None), Some(vec![]));
    assert_eq!(
        q.synchronize(Some(Instant::now() + Duration::from_millis(100))),
        None,
        "the gate is closed"
    );
    gate.store(true, Ordering::Release);
    assert_eq!(q.synchronize(None), Some(vec![]));
    assert_eq!(after.load(Ordering::Acquire), 11);
    q.close_and_drain();
    assert!(!q.inner.lock().worker_alive);
    assert_eq!(q.submit(quick(|| Ok(()))), Err(Closed));
}

#[test]
fn forced_close_abandons_and_cancels() {
    let q = queue();
    let gate = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU32::new(0));
    q.submit(Box::new(Gate(gate.clone(), count.clone())))
        .unwrap();
    q.submit(Box::new(Gate(gate.clone(), count.clone())))
        .unwrap();
    // Let the worker start the first wait.
    let started = Instant::now();
    while !q.inner.lock().running {
        assert!(started.elapsed() < Duration::from_secs(30), "no worker");
        std::thread::sleep(Duration::from_millis(1));
    }
    q.close_and_abort();
    assert_eq!(
        count.load(Ordering::Acquire),
        100,
        "one abandoned, none ran"
    );
    assert!(q.is_done(2));
    assert!(!q.inner.lock().worker_alive);
}

#[test]
fn held_queues_run_on_release() {
    let q = queue();
    q.hold();
    let count = Arc::new(AtomicU32::new(0));
    let c = count.clone();
    q.submit(quick(move || {
        c.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }))
    .unwrap();
    assert_eq!(count.load(Ordering::Acquire), 0);
    let last = q.release();
    assert!(q.wait_for(last, None));
    assert_eq!(count.load(Ordering::Acquire), 1);
}

#[test]
fn sliced_waits_time_out_and_cancel() {
    let t0 = Instant::now();
    let r = wait_sliced::<()>(None, Some(Duration::from_millis(120)), |slice| {
        std::thread::sleep(slice);
        Ok(false)
    });
    assert!(matches!(r, Err(WaitEnd::TimedOut)));
    assert!(t0.elapsed() >= Duration::from_millis(120));
    let cancel = Cancel::default();
    cancel.set();
    assert!(matches!(
        wait_sliced::<()>(Some(&cancel), None, |_| Ok(false)),
        Err(WaitEnd::Cancelled)
    ));
}

/// An operation a helper can run: blocks until `gate` is set, or until the helper's
/// deadline (then resumable).
struct Helpable(Arc<AtomicBool>, Arc<AtomicU32>);

impl Op<String> for Helpable {
    fn try_now(&mut self) -> Option<Result<(), String>> {
        self.0.load(Ordering::Acquire).then(|| {
            self.1.fetch_add(1, Ordering::AcqRel);
            Ok(())
        })
    }

    fn run(self: Box<Self>, _cancel: &Cancel) -> Result<(), String> {
        while !self.0.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.1.fetch_add(10, Ordering::AcqRel);
        Ok(())
    }

    fn run_until(
        &mut self,
        _cancel: &Cancel,
        until: Option<Instant>,
    ) -> Option<Result<(), String>> {
        loop {
            if self.0.load(Ordering::Acquire) {
                self.1.fetch_add(100, Ordering::AcqRel);
                return Some(Ok(()));
            }
            if until.is_some_and(|u| Instant::now() >= u) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[test]
fn a_helper_runs_the_stream_up_to_its_operation_and_gives_it_back_at_its_deadline() {
    let q = queue();
    let gate = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU32::new(0));
    let seq = q
        .submit(Box::new(Helpable(gate.clone(), count.clone())))
        .unwrap();
    q.submit(quick(|| Err("after".to_owned()))).unwrap();
    let last = q.submit(quick(|| Ok(()))).unwrap();
    // The deadline passes: the operation goes back to the queue, not consumed.
    assert!(!q.help_until(seq, Some(Instant::now() + Duration::from_millis(20))));
    assert!(!q.is_done(seq));
    gate.store(true, Ordering::Release);
    assert!(q.help_until(last, Some(Instant::now() + Duration::from_secs(30))));
    // Run once (never twice): by a helper (at once: 1; waiting: 100) or by the worker
    // after the first helper's deadline (10).
    let ran = count.load(Ordering::Acquire);
    assert!([1, 10, 100].contains(&ran), "{ran}");
    // The failure before `last` is seen, not collected.
    assert_eq!(q.first_error_before(last), Some("after".to_owned()));
    assert_eq!(q.first_error_before(seq + 1), None);
    assert_eq!(q.synchronize(None), Some(vec!["after".to_owned()]));
    q.close_and_drain();
}
