//! The harness itself, with real children of this test binary: messages (in order, out
//! of order, after libtest's own output), the parent's lines, the child's environment,
//! failures, kills with and without reaping, the watchdog, and test roots.

use std::time::Duration;

use devipc_testkit::{Child, ROLE_ENV, TestRoot, child_entry, run_child_within};

/// Entry point of the children; a no-op in the parent run.
#[test]
fn child_role() {
    // Short for the `watchdog` role, and long enough for all others.
    let watchdog = match std::env::var(ROLE_ENV).as_deref() {
        Ok("watchdog") => Duration::from_millis(200),
        _ => Duration::from_secs(120),
    };
    run_child_within(watchdog, |role, parent| match role {
        "echo" => {
            // Every line back (`@@ line <text>`), an empty one included, until EOF.
            while let Some(line) = parent.hear_line() {
                parent.say("line", &line);
            }
            parent.say("eof", "");
            Ok(())
        }
        "out-of-order" => {
            parent.say("a", "1");
            parent.say("b", "2");
            parent.say("c", "3");
            parent.hear_exactly("bye")
        }
        "env" => {
            for name in ["DEVIPC_EMU_DIR", "DEVIPC_RUNTIME_DIR", "KIT_SET", "PATH"] {
                let value = std::env::var(name).unwrap_or_else(|_| "<unset>".into());
                parent.say(&name.to_lowercase(), &value);
            }
            Ok(())
        }
        "fails" => Err("on purpose".into()),
        "sleeper" => {
            parent.say("pid", &std::process::id().to_string());
            std::thread::sleep(Duration::from_secs(120));
            Ok(())
        }
        "watchdog" => {
            std::thread::sleep(Duration::from_secs(120));
            Ok(())
        }
        other => Err(format!("unknown role {other}")),
    });
}

/// The state letter of `/proc/<pid>/stat`, `None` when there is no such process.
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.trim_start().chars().next()
}

#[test]
fn messages_and_lines_go_both_ways() {
    let root = TestRoot::new("echo");
    let mut child = Child::spawn(&child_entry(), "echo", &root, &[]);
    assert_eq!(child.role(), "echo");
    child.send("hello world");
    assert_eq!(child.expect("line"), "hello world");
    child.send("");
    // An empty line is not the end of input.
    assert_eq!(child.next_message(), Some(("line".into(), String::new())));
    child.send("x");
    assert_eq!(
        child.expect_one_of(&["eof", "line"]),
        ("line".into(), "x".into())
    );
    // `wait_success` closes the child's stdin: it sees the end of input and exits.
    child.wait_success();
}

#[test]
fn other_messages_are_dropped_or_kept() {
    let root = TestRoot::new("order");
    // By default, waiting for `c` drops `a` and `b`.
    let mut child = Child::spawn(&child_entry(), "out-of-order", &root, &[]);
    assert_eq!(child.expect("c"), "3");
    assert!(!child.has_kept("a"));
    child.send("bye");
    assert_eq!(child.next_message(), None, "nothing after c");
    child.wait_success();

    // Kept, they are answered later, in any order.
    let mut child = Child::build(&child_entry(), "out-of-order", &root)
        .keep_other_messages()
        .spawn();
    assert_eq!(child.expect("c"), "3");
    assert!(child.has_kept("a") && child.has_kept("b"));
    assert_eq!(child.expect("b"), "2");
    assert_eq!(child.expect_one_of(&["a", "b"]), ("a".into(), "1".into()));
    assert!(!child.has_kept("a"));
    child.send("bye");
    child.wait_success();
}

#[test]
fn children_get_the_roots_directories_and_chosen_variables() {
    let path = std::env::var("PATH").unwrap_or_else(|_| "<unset>".into());
    let root = TestRoot::new("env");
    let mut child = Child::build(&child_entry(), "env", &root).spawn();
    assert_eq!(
        child.expect("devipc_emu_dir"),
        root.emu_dir().to_str().unwrap()
    );
    assert_eq!(
        child.expect("devipc_runtime_dir"),
        root.run_dir().to_str().unwrap()
    );
    assert_eq!(child.expect("kit_set"), "<unset>");
    assert_eq!(child.expect("path"), path, "inherited");
    child.wait_success();

    for removed in [
        Child::build(&child_entry(), "env", &root).env_remove("PATH"),
        Child::build(&child_entry(), "env", &root).env_remove_prefix("PA"),
    ] {
        let mut child = removed.env("KIT_SET", "set").spawn();
        assert_eq!(child.expect("kit_set"), "set");
        assert_eq!(child.expect("path"), "<unset>");
        child.wait_success();
    }

    // What is set wins over what is removed; the role and the root stay.
    let mut child = Child::build(&child_entry(), "env", &root)
        .env_remove_prefix("")
        .envs([("KIT_SET", "set"), ("PATH", "/nowhere")])
        .spawn();
    assert_eq!(
        child.expect("devipc_emu_dir"),
        root.emu_dir().to_str().unwrap()
    );
    assert_eq!(child.expect("kit_set"), "set");
    assert_eq!(child.expect("path"), "/nowhere");
    child.wait_success();
}

#[test]
#[should_panic(expected = "child fails failed: on purpose")]
fn a_failing_child_fails_the_test() {
    let root = TestRoot::new("fails");
    let mut child = Child::spawn(&child_entry(), "fails", &root, &[]);
    child.expect("never");
}

#[test]
#[should_panic(expected = "child fails exited with exit status: 1")]
fn a_child_exiting_unsuccessfully_fails_wait_success() {
    let root = TestRoot::new("fails-wait");
    Child::spawn(&child_entry(), "fails", &root, &[]).wait_success();
}

#[test]
fn kill_no_reap_leaves_a_zombie_until_reaped() {
    let root = TestRoot::new("zombie");
    let mut child = Child::spawn(&child_entry(), "sleeper", &root, &[]);
    let pid = child.pid();
    assert_eq!(child.expect("pid"), pid.to_string());
    child.kill_no_reap();
    assert_eq!(proc_state(pid), Some('Z'), "killed and not reaped");
    child.reap();
    assert_eq!(proc_state(pid), None, "reaped");

    let child = Child::spawn(&child_entry(), "sleeper", &root, &[]);
    let pid = child.pid();
    child.kill();
    assert_eq!(proc_state(pid), None, "killed and reaped");
}

#[test]
fn the_watchdog_ends_a_stuck_child() {
    let root = TestRoot::new("watchdog");
    let mut child = Child::spawn(&child_entry(), "watchdog", &root, &[]);
    assert_eq!(
        child.next_message(),
        None,
        "the child said nothing and ended"
    );
    assert_eq!(child.wait().code(), Some(97));
}

#[test]
fn the_child_entry_is_the_callers_module() {
    assert_eq!(child_entry(), "harness::child_role");
}

#[test]
fn test_roots_are_distinct_and_removed_on_drop() {
    let a = TestRoot::new("same");
    let b = TestRoot::new("same");
    assert_ne!(a.path(), b.path());
    assert!(a.path().is_dir() && b.path().is_dir());
    let path = a.path().to_owned();
    drop(a);
    assert!(!path.exists());
    assert!(b.path().is_dir());
    b.assert_emulator_clean();
}
