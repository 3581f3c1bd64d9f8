//! Stress: 16 processes x 1,000 import/close cycles of one export, on each emulated
//! backend, with 0 errors and nothing left in the emulator's state directory.

use std::time::{Duration, Instant};

use devipc::{BackendKind, DeviceId, ExportOptions, MemToken, Runtime};
use devipc_testkit::{Child, Parent, TestRoot, child_entry, run_child};
use serial_test::parallel;

const IMPORTERS: usize = 16;
const CYCLES: usize = 1000;
const SIZE: usize = 1 << 16;

fn kind() -> Result<BackendKind, String> {
    std::env::var("KIND")
        .map_err(|e| e.to_string())?
        .parse()
        .map_err(|e: devipc::Error| e.to_string())
}

#[test]
fn child_role() {
    run_child(|role, parent| match role {
        "exporter" => exporter(parent),
        "importer" => importer(parent),
        other => Err(format!("unknown role {other}")),
    });
}

fn exporter(parent: &Parent) -> Result<(), String> {
    let rt = Runtime::emulated(kind()?).map_err(|e| e.to_string())?;
    let buf = rt.allocate(DeviceId(0), SIZE).map_err(|e| e.to_string())?;
    let pattern: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    buf.write(0, &pattern).map_err(|e| e.to_string())?;
    let token = buf
        .export(ExportOptions::any_process())
        .map_err(|e| e.to_string())?;
    parent.say("token", &token.to_text());
    parent.hear_exactly("done")?;
    drop(buf);
    parent.say("freed", "");
    Ok(())
}

fn importer(parent: &Parent) -> Result<(), String> {
    let rt = Runtime::emulated(kind()?).map_err(|e| e.to_string())?;
    let token: MemToken = parent
        .hear()
        .parse()
        .map_err(|e: devipc::Error| e.to_string())?;
    let mut errors = 0usize;
    let mut first_error = String::new();
    let mut probe = [0u8; 4];
    for cycle in 0..CYCLES {
        let result = rt.import(&token, DeviceId(0)).and_then(|imported| {
            let at = (cycle * 4099) % (SIZE - 4);
            imported.read(at, &mut probe)?;
            let expected: Vec<u8> = (at..at + 4).map(|i| (i % 251) as u8).collect();
            if probe[..] != expected[..] {
                return Err(devipc::Error::invalid_argument(format!(
                    "cycle {cycle}: wrong bytes at {at}"
                )));
            }
            Ok(())
        });
        if let Err(e) = result {
            errors += 1;
            if first_error.is_empty() {
                first_error = e.to_string();
            }
        }
    }
    if rt.live_imports() != 0 {
        return Err(format!(
            "{} imports still live after the cycles",
            rt.live_imports()
        ));
    }
    parent.say("errors", &format!("{errors} {first_error}"));
    Ok(())
}

fn stress(kind: BackendKind) {
    let root = TestRoot::new(&format!("stress-{kind}"));
    let env = [("KIND", kind.to_string())];
    let mut exporter = Child::spawn(&child_entry(), "exporter", &root, &env);
    let token = exporter.expect("token");
    let start = Instant::now();
    let mut importers: Vec<Child> = (0..IMPORTERS)
        .map(|_| Child::spawn(&child_entry(), "importer", &root, &env))
        .collect();
    for imp in &mut importers {
        imp.send(&token);
    }
    for imp in &mut importers {
        let report = imp.expect("errors");
        assert!(
            report.starts_with("0 ") || report == "0",
            "{kind}: {report}"
        );
    }
    let elapsed = start.elapsed();
    for imp in importers {
        imp.wait_success();
    }
    exporter.send("done");
    exporter.expect("freed");
    exporter.wait_success();
    eprintln!(
        "stress {kind}: {IMPORTERS} processes x {CYCLES} import/read/close cycles in {elapsed:.2?} \
         ({:.0} cycles/s in total)",
        (IMPORTERS * CYCLES) as f64 / elapsed.as_secs_f64()
    );
    assert!(elapsed < Duration::from_secs(600));
    root.assert_emulator_clean();
}

#[test]
#[parallel(load)]
fn sixteen_processes_import_and_close_a_thousand_times_on_emulated_hip() {
    stress(BackendKind::Hip);
}

#[test]
#[parallel(load)]
fn sixteen_processes_import_and_close_a_thousand_times_on_emulated_ascend() {
    stress(BackendKind::Ascend);
}
