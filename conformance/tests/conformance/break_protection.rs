//! devipc's own protections are each what keeps a portable rule's scenario safe: with one
//! switched off (`DEVIPC_BREAK_PROTECTION`, feature `fault-injection`), at least one
//! portable rule fails on the strict emulator, and the failing rule names the broken
//! behaviour (a read of released memory, a close that should have been refused).

use crate::support::run_json;
use devipc_core::protection::{BREAK_ENV, Protection};
use serial_test::serial;

/// The portable rules that must fail when `protection` is off, on which backend.
fn expected(protection: Protection) -> &'static [(&'static str, &'static str)] {
    match protection {
        // The transfer rule's exporter frees while the copy is queued: it needs the
        // deferred free as much as the request's hold on the import.
        Protection::HipDeferredFree => &[
            ("emulated-hip", "portable.lifetime.free-waits-for-importers"),
            ("emulated-hip", "portable.transfer.close-waits-for-copies"),
        ],
        Protection::AscendKeyCloseOrder => &[(
            "emulated-ascend",
            "portable.lifetime.external-close-waits-for-importers",
        )],
        // The cache is the facade's, whatever the mechanism: the hip-vmm-fd run of the
        // rule catches it too. (The deferred free is legacy HIP memory's: VMM memory lives
        // while an importer holds its handle, so that run passes without it.)
        Protection::ImportCacheRefcount => &[
            ("emulated-ascend", "portable.import.cache-refcounted"),
            ("emulated-hip", "portable.import.cache-refcounted"),
            ("emulated-hip-vmm", "portable.import.cache-refcounted"),
        ],
        Protection::RequestKeepsMemory => &[
            (
                "emulated-ascend",
                "portable.transfer.close-waits-for-copies",
            ),
            ("emulated-hip", "portable.transfer.close-waits-for-copies"),
            (
                "emulated-hip-vmm",
                "portable.transfer.close-waits-for-copies",
            ),
        ],
    }
}

#[test]
#[serial]
fn every_protection_switched_off_fails_a_portable_rule() {
    for protection in Protection::ALL {
        let (report, out) = run_json(&["--rule", "portable.*"], &[(BREAK_ENV, protection.name())]);
        assert_eq!(out.status.code(), Some(1), "{protection}: {report}");
        let mut failed: Vec<(String, String)> = Vec::new();
        for b in report["backends"].as_array().unwrap() {
            for r in b["results"].as_array().unwrap() {
                if r["result"] == "fail" {
                    failed.push((
                        b["backend"].as_str().unwrap().to_owned(),
                        r["rule"].as_str().unwrap().to_owned(),
                    ));
                }
            }
        }
        let want: Vec<(String, String)> = expected(protection)
            .iter()
            .map(|(b, r)| ((*b).to_owned(), (*r).to_owned()))
            .collect();
        assert_eq!(failed, want, "{protection}: {report}");
    }
}
