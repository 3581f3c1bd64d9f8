//! The harness with real children of this test binary: deadlines that kill, strict
//! conversations, values over several lines, kept stderr, and process groups.

use std::time::{Duration, Instant};

use devipc_child::{Child, ChildError, Command, FOREVER, OtherMessages, hear, run_role, say};

/// Names the role a re-run of this test binary plays.
const ROLE_ENV: &str = "DEVIPC_CHILD_TEST_ROLE";

/// Entry point of the children; a no-op in the parent run.
#[test]
fn child_role() {
    let Ok(role) = std::env::var(ROLE_ENV) else {
        return;
    };
    devipc_child::start_watchdog(Duration::from_secs(60), "test child: giving up".into());
    let ok = run_role(&format!("test child {role}"), || match role.as_str() {
        "silent" => {
            std::thread::sleep(Duration::from_secs(60));
            Ok(())
        }
        "talker" => {
            eprintln!("a line on stderr");
            say("first", "1");
            say("two", "line one\nline two \\ end");
            let _ = hear();
            std::process::exit(3);
        }
        "grandparent" => {
            let grandchild = spawn("silent").map_err(|e| e.to_string())?;
            say("grandchild", &grandchild.pid().to_string());
            std::mem::forget(grandchild);
            std::thread::sleep(Duration::from_secs(60));
            Ok(())
        }
        other => Err(format!("unknown role {other}")),
    });
    std::process::exit(if ok { 0 } else { 1 });
}

fn command(role: &str) -> Command {
    Command::new(role)
        .unwrap()
        .args([
            "lifecycle::child_role",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE_ENV, role)
}

fn spawn(role: &str) -> std::io::Result<Child> {
    command(role).spawn()
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

#[test]
fn a_wait_that_runs_out_kills_the_child() {
    let mut child = spawn("silent").unwrap();
    let started = Instant::now();
    let err = child.next(Duration::from_millis(300)).unwrap_err();
    assert_eq!(err, ChildError::Timeout(Duration::from_millis(300)));
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(child.status().is_some(), "killed and reaped");
    assert!(
        err.describe("silent", "a hello")
            .contains("did not answer (a hello) within 0.3s and was killed")
    );
}

#[test]
fn values_keep_their_lines_and_stderr_is_kept() {
    let mut child = command("talker").capture_stderr(4000).spawn().unwrap();
    assert_eq!(
        child.expect("two", FOREVER).unwrap(),
        "line one\nline two \\ end"
    );
    assert_eq!(child.finish(FOREVER), Err("exited with code 3".to_owned()));
    assert!(child.stderr().contains("a line on stderr"));
    let explained = child.explain("it failed");
    assert!(
        explained.starts_with("it failed; stderr of `talker`:\n"),
        "{explained}"
    );
}

#[test]
fn a_strict_conversation_refuses_other_messages() {
    let mut child = command("talker")
        .other_messages(OtherMessages::Refuse)
        .capture_stderr(4000)
        .spawn()
        .unwrap();
    assert_eq!(
        child.expect("two", FOREVER),
        Err(ChildError::Unexpected {
            key: "first".into(),
            value: "1".into()
        })
    );
}

#[test]
fn a_child_leading_a_group_dies_with_its_children() {
    let mut child = command("grandparent").new_process_group().spawn().unwrap();
    let grandchild: u32 = child
        .expect("grandchild", Duration::from_secs(30))
        .unwrap()
        .parse()
        .unwrap();
    assert!(alive(grandchild));
    child.kill();
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(grandchild) {
        assert!(
            Instant::now() < deadline,
            "the grandchild outlived the kill"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
