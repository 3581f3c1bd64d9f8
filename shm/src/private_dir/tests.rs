//! Tests of the private-directory checks.

use super::*;

/// A fresh directory under the temp dir with `mode`, removed first if left over.
fn scratch(name: &str, mode: u32) -> PathBuf {
    let p = std::env::temp_dir().join(format!("devipc-pd-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&p);
    fs::create_dir(&p).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
    p
}

fn unsafe_component(r: Result<PathBuf, PrivateDirError>) -> (PathBuf, ComponentProblem) {
    match r {
        Err(PrivateDirError::Refused {
            problem: DirProblem::UnsafeComponent { component, problem },
            ..
        }) => (component, problem),
        other => panic!("expected an unsafe component, got {other:?}"),
    }
}

#[test]
fn refuses_a_parent_others_can_write() {
    let uid = crate::os::effective_uid();
    for mode in [0o777, 0o775, 0o757] {
        let base = scratch(&format!("writable-{mode:o}"), mode);
        let gid = fs::metadata(&base).unwrap().gid();
        if mode == 0o775 && user_private_group(uid) == Some(gid) {
            // Group-writable by our private group only: that is fine (see below).
            fs::remove_dir_all(&base).unwrap();
            continue;
        }
        let (component, problem) = unsafe_component(open_private_dir(&base.join("d")));
        assert_eq!(component, fs::canonicalize(&base).unwrap());
        assert_eq!(problem, ComponentProblem::Writable { mode });
        // Also when the refused parent is higher up and the rest is missing.
        let (component, _) = unsafe_component(open_private_dir(&base.join("a/b/d")));
        assert_eq!(component, fs::canonicalize(&base).unwrap());
        assert!(!base.join("a").exists(), "nothing is created below it");
        fs::remove_dir_all(&base).unwrap();
    }
}

/// Debian's umask 002 makes a user's directories group-writable by the user's private
/// group; such a parent is as safe as 0755 and accepted.
#[test]
fn accepts_a_parent_writable_only_by_the_users_private_group() {
    let uid = crate::os::effective_uid();
    let Some(private) = user_private_group(uid) else {
        return; // no user-private group here: the refusal is tested above
    };
    let base = scratch("private-group", 0o775);
    std::os::unix::fs::chown(&base, None, Some(private)).unwrap();
    let dir = open_private_dir(&base.join("d")).unwrap();
    assert_eq!(dir, fs::canonicalize(&base).unwrap().join("d"));
    fs::remove_dir_all(&base).unwrap();
}

#[test]
fn accepts_a_sticky_parent_and_creates_missing_parents_0700() {
    let base = scratch("sticky", 0o1777);
    let dir = open_private_dir(&base.join("a/b/d")).unwrap();
    assert_eq!(dir, fs::canonicalize(&base).unwrap().join("a/b/d"));
    for p in [base.join("a"), base.join("a/b"), dir.clone()] {
        assert_eq!(DirFacts::of(&p).unwrap().mode, 0o700, "{}", p.display());
    }
    assert_eq!(open_private_dir(&dir).unwrap(), dir);
    fs::remove_dir_all(&base).unwrap();
}

#[test]
fn follows_own_links_and_checks_their_targets() {
    // A link of ours in a safe directory is followed; the directory is reported by
    // its real path.
    let base = scratch("links", 0o700);
    fs::create_dir(base.join("real")).unwrap();
    std::os::unix::fs::symlink(base.join("real"), base.join("link")).unwrap();
    let dir = open_private_dir(&base.join("link/d")).unwrap();
    assert_eq!(dir, fs::canonicalize(&base).unwrap().join("real/d"));
    // A relative link whose target lies below a directory others can write is
    // refused, naming the real component.
    let open = scratch("links-open", 0o777);
    fs::create_dir(open.join("t")).unwrap();
    std::os::unix::fs::symlink(
        Path::new("..").join(open.file_name().unwrap()).join("t"),
        base.join("rel"),
    )
    .unwrap();
    let (component, problem) = unsafe_component(open_private_dir(&base.join("rel/d")));
    assert_eq!(component, fs::canonicalize(&open).unwrap());
    assert_eq!(problem, ComponentProblem::Writable { mode: 0o777 });
    // A loop is refused, not followed forever.
    std::os::unix::fs::symlink(base.join("loop"), base.join("loop")).unwrap();
    let (_, problem) = unsafe_component(open_private_dir(&base.join("loop/d")));
    assert_eq!(problem, ComponentProblem::TooManySymlinks);
    // The directory itself must not be a link.
    assert!(matches!(
        open_private_dir(&base.join("link")),
        Err(PrivateDirError::Refused {
            problem: DirProblem::Symlink,
            ..
        })
    ));
    fs::remove_dir_all(&base).unwrap();
    fs::remove_dir_all(&open).unwrap();
}

#[test]
fn refuses_an_empty_path_and_a_file_on_the_way() {
    assert!(matches!(
        open_private_dir(Path::new("")),
        Err(PrivateDirError::Refused {
            problem: DirProblem::Empty,
            ..
        })
    ));
    let base = scratch("file", 0o700);
    fs::write(base.join("f"), b"x").unwrap();
    let (component, problem) = unsafe_component(open_private_dir(&base.join("f/d")));
    assert_eq!(component, fs::canonicalize(&base).unwrap().join("f"));
    assert_eq!(problem, ComponentProblem::NotDirectory);
    fs::remove_dir_all(&base).unwrap();
}

#[test]
fn an_empty_runtime_dir_is_a_config_error_naming_the_variable() {
    let empty = open_private_dir(Path::new("")).unwrap_err();
    match runtime_dir_error(empty) {
        devipc_core::Error::Config { what, problem, .. } => {
            assert!(what.contains(RUNTIME_DIR_ENV), "{what}");
            assert!(problem.contains("empty"), "{problem}");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    let base = scratch("rt-writable", 0o777);
    let refused = open_private_dir(&base.join("run")).unwrap_err();
    match runtime_dir_error(refused) {
        devipc_core::Error::Config { problem, .. } => {
            let real = fs::canonicalize(&base).unwrap();
            assert!(problem.contains(&real.display().to_string()), "{problem}");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    fs::remove_dir_all(&base).unwrap();
}

#[test]
fn a_user_private_group_is_recognised_only_when_nobody_else_is_in_it() {
    let passwd = "root:x:0:0::/root:/bin/sh\nana:x:1000:1000::/home/ana:/bin/sh\nbo:x:1001:100::/home/bo:/bin/sh\ncy:x:1002:100::/:/bin/sh\n";
    let group = "root:x:0:\nana:x:1000:\nusers:x:100:\nshared:x:2000:ana,bo\n";
    assert_eq!(private_group_in(1000, passwd, group), Some(1000));
    // Primary group shared with another user.
    assert_eq!(private_group_in(1001, passwd, group), None);
    // The group lists another member.
    let group2 = "ana:x:1000:bo\n";
    assert_eq!(private_group_in(1000, passwd, group2), None);
    let group3 = "ana:x:1000:ana\n";
    assert_eq!(private_group_in(1000, passwd, group3), Some(1000));
    // Unknown user or group.
    assert_eq!(private_group_in(4242, passwd, group), None);
    assert_eq!(private_group_in(1000, passwd, "root:x:0:\n"), None);
}

#[test]
fn a_fifo_is_refused_without_hanging() {
    let dir = scratch("fifo", 0o700);
    let fifo = dir.join("record");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        return; // no mkfifo here: nothing to test
    }
    let err = open_regular_file(&fifo).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    std::fs::write(dir.join("plain"), b"x").unwrap();
    assert!(open_regular_file(&dir.join("plain")).is_ok());
    std::os::unix::fs::symlink(dir.join("plain"), dir.join("link")).unwrap();
    assert!(
        open_regular_file(&dir.join("link")).is_err(),
        "links are not followed"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn component_rule_owners_and_modes() {
    let dir = |uid, mode| DirFacts {
        is_symlink: false,
        is_dir: true,
        uid,
        gid: u32::MAX,
        mode,
    };
    let link = |uid| DirFacts {
        is_symlink: true,
        is_dir: false,
        uid,
        gid: u32::MAX,
        mode: 0o777,
    };
    assert_eq!(check_component_facts(&dir(0, 0o755), 1000), Ok(()));
    assert_eq!(check_component_facts(&dir(1000, 0o700), 1000), Ok(()));
    assert_eq!(check_component_facts(&dir(0, 0o1777), 1000), Ok(()));
    assert_eq!(
        check_component_facts(&dir(1001, 0o755), 1000),
        Err(ComponentProblem::WrongOwner { owner: 1001 })
    );
    assert_eq!(
        check_component_facts(&dir(1001, 0o1777), 1000),
        Err(ComponentProblem::WrongOwner { owner: 1001 })
    );
    assert_eq!(
        check_component_facts(&dir(0, 0o775), 1000),
        Err(ComponentProblem::Writable { mode: 0o775 })
    );
    assert_eq!(check_component_facts(&link(0), 1000), Ok(()));
    assert_eq!(check_component_facts(&link(1000), 1000), Ok(()));
    assert_eq!(
        check_component_facts(&link(1001), 1000),
        Err(ComponentProblem::Symlink { owner: 1001 })
    );
    let msg = DirProblem::UnsafeComponent {
        component: "/srv/shared".into(),
        problem: ComponentProblem::Writable { mode: 0o777 },
    }
    .to_string();
    assert!(msg.contains("/srv/shared") && msg.contains("0777"), "{msg}");
}

#[test]
fn refuses_other_owner() {
    // chown needs privileges, so test the pure rule on fabricated facts.
    let facts = DirFacts {
        is_symlink: false,
        is_dir: true,
        uid: 4321,
        gid: 4321,
        mode: 0o700,
    };
    assert_eq!(
        check_dir_facts(&facts, 1234),
        Err(DirProblem::WrongOwner {
            owner: 4321,
            expected: 1234
        })
    );
    assert_eq!(check_dir_facts(&facts, 4321), Ok(()));
    let msg = DirProblem::WrongOwner {
        owner: 4321,
        expected: 1234,
    }
    .to_string();
    assert!(msg.contains("4321") && msg.contains("1234"), "{msg}");
    // Symlink is reported before anything else.
    let link = DirFacts {
        is_symlink: true,
        is_dir: false,
        ..facts
    };
    assert_eq!(check_dir_facts(&link, 1), Err(DirProblem::Symlink));
}
