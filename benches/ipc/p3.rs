//! P3: a `Signal` ping-pong between two processes against a `BinarySemaphore` (futex)
//! ping-pong on a shared file (goal: at most 1.2x, issue 25), with both processes pinned to one
//! CPU.

use std::path::Path;
use std::time::Instant;

use devipc::{BackendChoice, BackendKind, ExportOptions, ProcessId, Runtime};
use devipc_shm::futex::BinarySemaphore;
use devipc_shm::private_dir::open_private_dir;
use devipc_shm::word_file::WordFile;

use crate::peer::Peer;
use crate::stats::{Goal, Row, paired};
use crate::{BenchResult, DEV, Plan, WAIT};

/// Pins this process (and so the children it spawns next) to the first CPU it may run
/// on, and returns the previous affinity; `DEVIPC_BENCH_UNPINNED=1` leaves it alone.
///
/// On a small VM a wake-up that crosses to an idle vCPU costs 50-100 us and strikes at
/// random, swamping the few microseconds a round trip takes; on one CPU every round trip
/// is two plain context switches, for the baseline and devipc alike.
fn pin_to_one_cpu() -> BenchResult<Option<libc::cpu_set_t>> {
    if std::env::var_os("DEVIPC_BENCH_UNPINNED").is_some_and(|v| v == "1") {
        return Ok(None);
    }
    // SAFETY: cpu_set_t is plain data; all zeroes is the empty set.
    let mut previous: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer of the size passed.
    let rc = unsafe {
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut previous)
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    let first = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE.
        .find(|&cpu| unsafe { libc::CPU_ISSET(cpu, &previous) })
        .ok_or("no CPU in the affinity mask")?;
    // SAFETY: as above.
    let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `first` is below CPU_SETSIZE.
    unsafe { libc::CPU_SET(first, &mut one) };
    set_affinity(&one)?;
    Ok(Some(previous))
}

fn set_affinity(set: &libc::cpu_set_t) -> BenchResult<()> {
    // SAFETY: a valid set of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

/// P3: signal round trips between two processes: devipc `Signal`s vs raw futex
/// semaphores in a shared word file.
pub fn run(kind: BackendKind, plan: Plan, rt: &Runtime, choice: BackendChoice) -> BenchResult<Row> {
    let total = plan.rounds * (plan.rounds_reps + 1);
    let pinned = pin_to_one_cpu()?;
    // devipc: two signals exported and granted to the ponger.
    let mut dev_peer = Peer::spawn("ponger-devipc", choice)?;
    let pid = ProcessId(dev_peer.expect("pid")?.parse()?);
    let ping = rt.create_signal(DEV)?;
    let pong = rt.create_signal(DEV)?;
    for s in [&ping, &pong] {
        let t = s.export(ExportOptions::granted_only())?;
        s.grant(&t, &[pid])?;
        dev_peer.send(&t.to_string())?;
    }
    dev_peer.send(&total.to_string())?;
    dev_peer.expect("ready")?;
    // Baseline: the same binary semaphore on a page the two processes map.
    let run_dir = std::env::var_os("DEVIPC_RUNTIME_DIR").ok_or("no runtime dir")?;
    // The runtime directory first, so that both it and ours are created 0700.
    let run_dir = open_private_dir(Path::new(&run_dir))?;
    let dir = open_private_dir(&run_dir.join("bench-futex"))?;
    let words = WordFile::create(&dir)?;
    let mut raw_peer = Peer::spawn("ponger-futex", choice)?;
    raw_peer.expect("pid")?;
    raw_peer.send(&dir.display().to_string())?;
    raw_peer.send(std::str::from_utf8(words.name())?)?;
    raw_peer.send(&total.to_string())?;
    raw_peer.expect("ready")?;
    let raw_ping = BinarySemaphore::new(words.word(0).ok_or("word 0")?);
    let raw_pong = BinarySemaphore::new(words.word(1).ok_or("word 1")?);
    let rounds = plan.rounds;
    let (base, dev) = paired(plan.rounds_reps, |devipc| {
        if !devipc {
            let start = Instant::now();
            for _ in 0..rounds {
                raw_ping.record()?;
                raw_pong.wait_and_reset(WAIT)?;
            }
            Ok(start.elapsed().as_secs_f64() / rounds as f64)
        } else {
            let start = Instant::now();
            for _ in 0..rounds {
                ping.notify()?;
                pong.wait(WAIT)?;
            }
            Ok(start.elapsed().as_secs_f64() / rounds as f64)
        }
    })?;
    dev_peer.finish()?;
    raw_peer.finish()?;
    words.unlink()?;
    if let Some(previous) = pinned {
        set_affinity(&previous)?;
    }
    Ok(Row {
        id: "P3",
        backend: kind,
        what: "signal round trip between two processes".into(),
        baseline_name: "futex",
        baseline: base,
        devipc: dev,
        goal: Goal::AtMost(1.2),
        judged: true,
    })
}
