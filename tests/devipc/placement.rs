//! Importers land on the exporter's physical device under any visibility mask (issue 16).
//!
//! The emulated machine has four devices (`DEVIPC_EMU_DEVICES=4`). The producer sees
//! physical devices {2,3} as {0,1}, the consumer sees {3,2} as {0,1} (HIP through
//! `HIP_VISIBLE_DEVICES`, Ascend through `ASCEND_RT_VISIBLE_DEVICES`), and a third process
//! sees only {0,1}. A token of the producer's device 1 (physical 3) must be placed on the
//! consumer's device 0, where its bytes are read; the third process cannot see the device
//! and is told so. A version 2 token (no identity) still imports by index.

use devipc::{
    BackendKind, DeviceId, Error, ExportOptions, MemToken, ProcessId, Runtime, SignalToken,
};
use devipc_testkit::{Child, Parent, TestRoot, child_entry};

/// Which backend the children run (`ascend` or `hip`).
const KIND_ENV: &str = "PLACEMENT_KIND";
/// What the producer writes at offset 128.
const BYTES: &[u8] = b"written on physical device 3";

#[test]
fn child_role() {
    devipc_testkit::run_child(|role, parent| {
        let kind = match std::env::var(KIND_ENV).as_deref() {
            Ok("ascend") => BackendKind::Ascend,
            Ok("hip") => BackendKind::Hip,
            other => return Err(format!("{KIND_ENV} is {other:?}")),
        };
        let rt = Runtime::emulated(kind).map_err(|e| e.to_string())?;
        match role {
            "producer" => producer(&rt, parent),
            "consumer" => consumer(&rt, parent),
            other => Err(format!("unknown role {other}")),
        }
        .map_err(|e| format!("{role}: {e}"))
    });
}

fn e2s(e: Error) -> String {
    e.to_string()
}

/// Allocates on its device 1, writes [`BYTES`], says the token (current format and
/// version 2), a signal token of device 1 and device 1's identity; grants each pid it is
/// told (`grant <pid>`); `exit`.
fn producer(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let device = DeviceId(1);
    let buf = rt.allocate(device, 1 << 20).map_err(e2s)?;
    buf.write(128, BYTES).map_err(e2s)?;
    let token = buf.export(ExportOptions::trustlist()).map_err(e2s)?;
    let signal = rt.create_signal(device).map_err(e2s)?;
    let signal_token = signal.export(ExportOptions::trustlist()).map_err(e2s)?;
    parent.say(
        "identity",
        &rt.physical_device(device).map_err(e2s)?.to_string(),
    );
    parent.say("token", &token.to_text());
    parent.say(
        "token-v2",
        &token.in_format_version(2).map_err(e2s)?.to_text(),
    );
    parent.say("signal", &signal_token.to_text());
    loop {
        let command = parent.hear();
        if let Some(pid) = command.strip_prefix("grant ") {
            let pid = ProcessId(pid.parse().map_err(|e| format!("pid {pid}: {e}"))?);
            buf.grant(&token, &[pid]).map_err(e2s)?;
            signal.grant(&signal_token, &[pid]).map_err(e2s)?;
            parent.say("granted", "");
        } else if command == "exit" {
            return Ok(());
        } else {
            return Err(format!("unknown command {command}"));
        }
    }
}

/// Says its pid; then, for `place <token>`, `signal <token>` and `v2 <token>`, what it
/// finds and reads (see `placed`); `exit`.
fn consumer(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    parent.say("pid", &rt.process_id().0.to_string());
    loop {
        let command = parent.hear();
        let (verb, text) = command.split_once(' ').unwrap_or((command.as_str(), ""));
        match verb {
            "place" => {
                let token = MemToken::from_text(text).map_err(e2s)?;
                parent.say("placed", &placed(rt, &token)?);
            }
            "signal" => {
                let token = SignalToken::from_text(text).map_err(e2s)?;
                let found = match rt.local_device_of(&token) {
                    Ok(Some(d)) => format!("device {}", d.0),
                    Ok(None) => "not visible".to_owned(),
                    Err(e) => format!("error {}", e.kind()),
                };
                parent.say("signal-device", &found);
            }
            "v2" => {
                let token = MemToken::from_text(text).map_err(e2s)?;
                let placed = match rt.local_device_of(&token) {
                    Err(Error::Unsupported { .. }) => "unsupported",
                    other => return Err(format!("a v2 token placed as {other:?}")),
                };
                // By index it imports as before: the consumer's device 0 is physical 3.
                let view = rt.import(&token, DeviceId(0)).map_err(e2s)?;
                let mut got = vec![0u8; BYTES.len()];
                view.read(128, &mut got).map_err(e2s)?;
                parent.say(
                    "v2",
                    &format!("{placed}, read {}", String::from_utf8_lossy(&got)),
                );
            }
            "exit" => return Ok(()),
            other => return Err(format!("unknown command {other}")),
        }
    }
}

/// `device <i> <identity>, read <bytes>` when the token's device is visible here as `i`
/// (imported there without naming it, and `i`'s identity is the token's), or `not
/// visible: <error kind>` when it is not.
fn placed(rt: &Runtime, token: &MemToken) -> Result<String, String> {
    let Some(device) = rt.local_device_of(token).map_err(e2s)? else {
        return match rt.import_on_exporter_device(token) {
            Err(e @ Error::DeviceNotVisible { .. }) => {
                Ok(format!("not visible: {} ({e})", e.kind()))
            }
            other => Err(format!("an invisible device imported as {other:?}")),
        };
    };
    let here = rt.physical_device(device).map_err(e2s)?;
    if here.same_device(token.physical_device()) != Some(true) {
        return Err(format!(
            "device {device} is {here}, the token's is {}",
            token.physical_device()
        ));
    }
    let view = rt.import_on_exporter_device(token).map_err(e2s)?;
    if view.device() != device {
        return Err(format!("imported on {}, placed on {device}", view.device()));
    }
    let mut got = vec![0u8; BYTES.len()];
    view.read(128, &mut got).map_err(e2s)?;
    Ok(format!(
        "device {} {here}, read {}",
        device.0,
        String::from_utf8_lossy(&got)
    ))
}

/// The visibility variable of `kind` the test narrows with.
fn mask_var(kind: BackendKind) -> &'static str {
    if kind == BackendKind::Hip {
        "HIP_VISIBLE_DEVICES"
    } else {
        "ASCEND_RT_VISIBLE_DEVICES"
    }
}

fn spawn(root: &TestRoot, kind: BackendKind, role: &str, mask: &str) -> Child {
    Child::build(&child_entry(), role, root)
        .env(KIND_ENV, kind.name())
        .env("DEVIPC_EMU_DEVICES", "4")
        .env(mask_var(kind), mask)
        .spawn()
}

fn placement_under_masks(kind: BackendKind) {
    let root = TestRoot::new(&format!("placement-{}", kind.name()));
    let mut producer = spawn(&root, kind, "producer", "2,3");
    let identity = producer.expect("identity");
    let token = producer.expect("token");
    let token_v2 = producer.expect("token-v2");
    let signal = producer.expect("signal");
    assert!(token.starts_with("devipc3:"), "{token}");
    assert!(token_v2.starts_with("devipc2:"), "{token_v2}");

    let mut consumer = spawn(&root, kind, "consumer", "3,2");
    let mut blind = spawn(&root, kind, "consumer", "0,1");
    for child in [&mut consumer, &mut blind] {
        let pid = child.expect("pid");
        producer.send(&format!("grant {pid}"));
        producer.expect("granted");
    }

    consumer.send(&format!("place {token}"));
    assert_eq!(
        consumer.expect("placed"),
        format!(
            "device 0 {identity}, read {}",
            String::from_utf8_lossy(BYTES)
        ),
        "the producer's device 1 is physical 3, the consumer's device 0"
    );
    consumer.send(&format!("signal {signal}"));
    assert_eq!(consumer.expect("signal-device"), "device 0");
    consumer.send(&format!("v2 {token_v2}"));
    assert_eq!(
        consumer.expect("v2"),
        format!("unsupported, read {}", String::from_utf8_lossy(BYTES))
    );

    blind.send(&format!("place {token}"));
    let placed = blind.expect("placed");
    assert!(
        placed.starts_with("not visible: device_not_visible")
            && placed.contains(&identity)
            && placed.contains(&format!("{}=0,1", mask_var(kind))),
        "{placed}"
    );
    blind.send(&format!("signal {signal}"));
    assert_eq!(blind.expect("signal-device"), "not visible");

    for mut child in [consumer, blind, producer] {
        child.send("exit");
        child.wait_success();
    }
    root.assert_emulator_clean();
}

#[test]
fn hip_import_lands_on_the_exporters_physical_device_under_other_masks() {
    placement_under_masks(BackendKind::Hip);
}

#[test]
fn ascend_import_lands_on_the_exporters_physical_device_under_other_masks() {
    placement_under_masks(BackendKind::Ascend);
}
