//! Reusing a removed lease's entry (audit finding N2): a late acquire of the old lease,
//! stopped between its slot claim and its re-check by the test hook, must never lower the
//! holder count of the entry's next lease.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

use super::hook::{self, Step};
use super::table::*;
use super::*;

fn scratch(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("devipc-lease-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    crate::private_dir::open_private_dir(&p).unwrap()
}

/// The audit's interleaving, on HIP's free path: importer S sees lease L live and claims
/// a slot, then stalls; the exporter revokes L, finds it unheld, frees the object and
/// removes L; S's increment lands; the exporter exports a new object whose lease L' gets
/// L's entry; importer N holds L'; S's re-check fails and undoes its hold. N's hold must
/// still count, or the exporter frees L's object under N.
#[test]
fn a_late_acquire_of_a_removed_lease_never_lowers_the_next_leases_count() {
    let dir = scratch("late-acquire");
    let lease = Lease::create(&dir).unwrap();
    // Every fresh entry in use, so the next lease must reuse the removed one.
    let fillers: Vec<Lease> = (1..ENTRIES).map(|_| Lease::create(&dir).unwrap()).collect();
    assert!(fillers.iter().all(|f| Arc::ptr_eq(&f.table, &lease.table)));
    let n = ProcessIdentity::current().unwrap();
    // S: another live process (its slot must not be reclaimed as a dead holder's).
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let s = ProcessIdentity::of_pid(sleeper.id() as i32)
        .unwrap()
        .unwrap();

    let next: Rc<RefCell<Option<Lease>>> = Rc::default();
    let (lease_name, dir2) = (*lease.name(), dir.clone());
    let next_in_hook = next.clone();
    let make_next = move || {
        let l2 = Lease::create(&dir2).unwrap();
        l2.acquire(n).unwrap();
        l2
    };
    let make_next = Rc::new(make_next);
    let make_in_hook = make_next.clone();
    hook::set(Some(Box::new(move |step, who| {
        if who != s {
            return;
        }
        match step {
            Step::Claimed => {
                // The exporter frees: S has not counted yet, so L reads unheld.
                let l = Lease::open(&dir, &lease_name).unwrap();
                assert!(l.revoke());
                assert!(l.is_unheld(false), "S has not counted yet");
                l.remove().unwrap();
            }
            Step::Counted => {
                // The exporter exports again, and N holds the new lease.
                *next_in_hook.borrow_mut() = Some(make_in_hook());
            }
        }
    })));
    let late = lease.acquire(s);
    hook::set(None);
    assert_eq!(
        late.unwrap_err().kind(),
        io::ErrorKind::NotFound,
        "S's acquire of the removed lease fails"
    );
    let l2 = next.borrow_mut().take().unwrap_or_else(|| make_next());
    assert_eq!(l2.index, lease.index, "the removed entry was reused");
    assert!(
        !l2.is_unheld(false),
        "N holds the new lease, but its count reads 0: the exporter would free under N"
    );
    assert_eq!(l2.live_holders(), 1);
    l2.release(n);
    assert!(l2.is_unheld(false));

    let _ = sleeper.kill();
    let _ = sleeper.wait();
    l2.remove().unwrap();
    for f in fillers {
        f.remove().unwrap();
    }
    std::fs::remove_dir_all(lease.table.dir().unwrap()).unwrap();
}

/// An entry whose old lease a live process still holds (removed under its holder) is not
/// reused, and the old holder's release does not touch the count of a later lease.
#[test]
fn an_entry_named_by_a_holders_slot_is_not_reused() {
    let dir = scratch("named");
    let lease = Lease::create(&dir).unwrap();
    let fillers: Vec<Lease> = (1..ENTRIES).map(|_| Lease::create(&dir).unwrap()).collect();
    let me = ProcessIdentity::current().unwrap();
    lease.acquire(me).unwrap();
    lease.remove().unwrap();
    // The table is full and its one removed entry still held: a new table.
    let other = Lease::create(&dir).unwrap();
    assert!(!Arc::ptr_eq(&other.table, &lease.table));
    lease.release(me);
    // Now nobody names it: reused, with a count of 0.
    fillers[0].remove().unwrap();
    let reused = Lease::create(&dir).unwrap();
    assert!(Arc::ptr_eq(&reused.table, &lease.table));
    assert!(reused.is_unheld(false));
    for l in [reused, other] {
        l.remove().unwrap();
    }
    for f in fillers.into_iter().skip(1) {
        f.remove().unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
