//! Children that would leave the parent stuck or bloated: a group leader that exits and
//! leaves a grandchild behind, a grandchild that holds the child's pipes, a child that
//! does not read its stdin, one that floods its stdout without line ends or sends an
//! over-long message, and protocol corner cases (`\r` in a value, a marker mid-line).
//!
//! Every blocking call under test runs on a helper thread with a deadline, so a
//! regression fails the test instead of hanging it.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use devipc_child::{Child, ChildError, Command, MAX_LINE};

/// Names the role a re-run of this test binary plays.
const ROLE_ENV: &str = "DEVIPC_CHILD_STUCK_ROLE";

/// Generous deadline for things that should happen soon.
const LONG: Duration = Duration::from_secs(30);

/// Entry point of the children; a no-op in the parent run.
#[test]
fn child_role() {
    let Ok(role) = std::env::var(ROLE_ENV) else {
        return;
    };
    devipc_child::start_watchdog(
        Duration::from_secs(60),
        "stuck test child: giving up".into(),
    );
    let ok = devipc_child::run_role(&format!("stuck test child {role}"), || {
        match role.as_str() {
            // Starts a grandchild (in its group, holding its stdout and stderr), says its
            // pid and exits 0.
            "spawn-and-exit" => {
                let grandchild = sleeper()?;
                devipc_child::say("grandchild", &grandchild.to_string());
                std::process::exit(0);
            }
            // Starts a grandchild holding its pipes, writes to stderr, and hangs.
            "spawn-and-hang" => {
                let grandchild = sleeper()?;
                eprintln!("stderr before the hang");
                devipc_child::say("grandchild", &grandchild.to_string());
                std::thread::sleep(Duration::from_secs(60));
                Ok(())
            }
            "deaf" => {
                devipc_child::say("ready", "");
                std::thread::sleep(Duration::from_secs(60));
                Ok(())
            }
            "flood" => {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                let chunk = vec![b'x'; 1 << 20];
                for _ in 0..FLOOD_MIB {
                    out.write_all(&chunk).map_err(|e| e.to_string())?;
                }
                drop(out);
                devipc_child::say("after", "flood");
                Ok(())
            }
            "big-message" => {
                devipc_child::say("big", &"y".repeat(MAX_LINE + 10));
                devipc_child::say("small", "ok");
                Ok(())
            }
            "corners" => {
                devipc_child::say("v", "abc\r");
                println!("vendor noise @@ fail x");
                devipc_child::say("crlf", "one\r\ntwo");
                devipc_child::say("w", "2");
                Ok(())
            }
            other => Err(format!("unknown role {other}")),
        }
    });
    std::process::exit(if ok { 0 } else { 1 });
}

/// MiB the `flood` role writes without a line end.
const FLOOD_MIB: usize = 128;

/// Starts `sleep 60` (inheriting this process's group and stdio) and returns its pid.
fn sleeper() -> Result<u32, String> {
    let child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .map_err(|e| format!("starting sleep: {e}"))?;
    Ok(child.id())
}

fn command(role: &str) -> Command {
    Command::new(role)
        .unwrap()
        .args([
            "stuck::child_role",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE_ENV, role)
}

/// Whether `pid` names a live (not zombie) process.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let state = s[s.rfind(')')? + 1..].trim_start().chars().next()?;
            Some(state != 'Z' && state != 'X')
        })
        .unwrap_or(false)
}

/// Waits (up to [`LONG`]) for `pid` to die; whether it did.
fn dies(pid: u32) -> bool {
    let deadline = Instant::now() + LONG;
    while alive(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Kills a grandchild a failed test left behind (it is not this process's child).
fn cleanup(pid: u32) {
    // SAFETY: kill(2) of a pid; no memory is involved. At worst the pid was reused within
    // the test: it is a `sleep` started moments ago, in practice still ours.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
}

/// Runs `f(child)` on a thread; its result, or `None` when it took longer than `limit`
/// (the thread is left behind; the process ends with the test binary).
fn within<T: Send + 'static>(
    limit: Duration,
    mut child: Child,
    f: impl FnOnce(&mut Child) -> T + Send + 'static,
) -> Option<(T, Child)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let got = f(&mut child);
        let _ = tx.send((got, child));
    });
    rx.recv_timeout(limit).ok()
}

/// The child's pid's state letter `Z`: it exited and is not reaped.
fn wait_zombie(pid: u32) {
    let deadline = Instant::now() + LONG;
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        if stat[stat.rfind(')').unwrap() + 1..]
            .trim_start()
            .starts_with('Z')
        {
            return;
        }
        assert!(Instant::now() < deadline, "child {pid} did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_group_leader_that_exits_takes_its_group_with_it_on_finish() {
    let mut child = command("spawn-and-exit")
        .new_process_group()
        .spawn()
        .unwrap();
    let grandchild: u32 = child.expect("grandchild", LONG).unwrap().parse().unwrap();
    wait_zombie(child.pid());
    assert_eq!(child.finish(LONG), Ok(()));
    let died = dies(grandchild);
    cleanup(grandchild);
    assert!(died, "the grandchild outlived its group leader's finish");
}

#[test]
fn a_group_leader_that_exits_takes_its_group_with_it_on_drop() {
    let mut child = command("spawn-and-exit")
        .new_process_group()
        .spawn()
        .unwrap();
    let grandchild: u32 = child.expect("grandchild", LONG).unwrap().parse().unwrap();
    wait_zombie(child.pid());
    drop(child);
    let died = dies(grandchild);
    cleanup(grandchild);
    assert!(died, "the grandchild outlived the dropped group leader");
}

#[test]
fn a_group_leader_reaped_by_a_read_takes_its_group_with_it() {
    let mut child = command("spawn-and-exit")
        .new_process_group()
        .spawn()
        .unwrap();
    let grandchild: u32 = child.expect("grandchild", LONG).unwrap().parse().unwrap();
    // The leader exited; its stdout ends once the group is gone.
    let got = within(LONG, child, |c| c.next(devipc_child::FOREVER));
    let died = dies(grandchild);
    cleanup(grandchild);
    let (got, _child) = got.expect("next() returned");
    assert_eq!(got, Err(ChildError::Exited("exited with code 0".into())));
    assert!(died, "the grandchild outlived its group leader");
}

#[test]
fn stderr_and_reads_do_not_wait_for_a_grandchild_holding_the_pipes() {
    // No new group: the grandchild survives the kill and keeps stdout and stderr open.
    let mut child = command("spawn-and-hang")
        .capture_stderr(4000)
        .spawn()
        .unwrap();
    let grandchild: u32 = child.expect("grandchild", LONG).unwrap().parse().unwrap();
    assert_eq!(
        child.expect("never", Duration::from_millis(300)),
        Err(ChildError::Timeout(Duration::from_millis(300)))
    );
    assert!(alive(grandchild));
    let explained = within(LONG, child, |c| {
        let explained = c.explain("it hung");
        (explained, c.recv(devipc_child::FOREVER))
    });
    cleanup(grandchild);
    let ((explained, after), _child) = explained.expect("explain() and recv() returned");
    assert!(explained.contains("stderr before the hang"), "{explained}");
    assert_eq!(after, Ok(None));
}

#[test]
fn a_read_ends_when_the_child_exits_though_a_grandchild_holds_stdout() {
    let mut child = command("spawn-and-exit")
        .capture_stderr(4000)
        .spawn()
        .unwrap();
    let grandchild: u32 = child.expect("grandchild", LONG).unwrap().parse().unwrap();
    let got = within(LONG, child, |c| {
        let next = c.next(devipc_child::FOREVER);
        (next, c.stderr())
    });
    cleanup(grandchild);
    let ((next, _stderr), _child) = got.expect("next() and stderr() returned");
    assert_eq!(next, Err(ChildError::Exited("exited with code 0".into())));
}

#[test]
fn a_send_to_a_child_that_does_not_read_times_out_and_kills_it() {
    let mut child = command("deaf")
        .send_timeout(Duration::from_millis(500))
        .spawn()
        .unwrap();
    child.expect("ready", LONG).unwrap();
    let sent = within(LONG, child, |c| c.send(&"x".repeat(1 << 20)));
    let (sent, child) = sent.expect("send() returned");
    assert_eq!(
        sent,
        Err(ChildError::SendTimeout(Duration::from_millis(500)))
    );
    assert!(child.status().is_some(), "killed and reaped");
    assert!(
        sent.unwrap_err()
            .describe("deaf", "a command")
            .contains("did not read its input (a command) within 0.5s and was killed")
    );
}

#[test]
fn a_short_send_fits_without_the_child_reading() {
    let mut child = command("deaf")
        .send_timeout(Duration::from_millis(100))
        .spawn()
        .unwrap();
    child.expect("ready", LONG).unwrap();
    assert_eq!(child.send("hello"), Ok(()));
    assert!(child.status().is_none());
}

/// The resident set of this process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_flood_without_line_ends_is_dropped_not_held() {
    let before = rss_kib();
    let mut child = command("flood").spawn().unwrap();
    assert_eq!(child.expect("after", LONG), Ok("flood".to_owned()));
    let grown_mib = rss_kib().saturating_sub(before) / 1024;
    assert_eq!(child.finish(LONG), Ok(()));
    // The old reader held the whole line (128 MiB, more with the doubling).
    assert!(
        grown_mib < (FLOOD_MIB as u64) / 2,
        "the parent grew by {grown_mib} MiB reading a {FLOOD_MIB} MiB line"
    );
}

#[test]
fn an_overlong_message_is_refused_and_the_next_one_read() {
    let mut child = command("big-message").spawn().unwrap();
    let err = child.next(LONG).unwrap_err();
    assert_eq!(
        err,
        ChildError::MessageTooLong {
            key: "big".into(),
            limit: MAX_LINE
        }
    );
    assert!(
        err.to_string().contains("longer than 1048576 bytes"),
        "{err}"
    );
    assert_eq!(child.expect("small", LONG), Ok("ok".to_owned()));
    assert_eq!(child.finish(LONG), Ok(()));
}

#[test]
fn carriage_returns_round_trip_and_a_marker_mid_line_is_noise() {
    let mut child = command("corners").spawn().unwrap();
    assert_eq!(child.next(LONG), Ok(("v".into(), "abc\r".into())));
    // `vendor noise @@ fail x` is not a message.
    assert_eq!(child.next(LONG), Ok(("crlf".into(), "one\r\ntwo".into())));
    assert_eq!(child.next(LONG), Ok(("w".into(), "2".into())));
    assert_eq!(child.finish(LONG), Ok(()));
}
