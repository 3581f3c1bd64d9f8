//! Importers land on the exporter's physical device under any visibility mask (issue 16).
//!
//! The emulated machine has four devices (`DEVIPC_EMU_DEVICES=4`). The producer sees
//! physical devices {2,3} as {0,1}, the consumer sees {3,2} as {0,1} (HIP through
//! `HIP_VISIBLE_DEVICES`, Ascend through `ASCEND_RT_VISIBLE_DEVICES`), and a third process
//! sees only {0,1}. A token of the producer's device 1 (physical 3) must be placed on the
//! consumer's device 0, where its bytes are read; the third process cannot see the device
//! and is told so. A version 2 token (no identity) still imports by index.
//!
//! Masks that renumber the exporter's device must not confuse what is the same device:
//! a consumer seeing one device imports from an unmasked producer's device 1 (its device
//! 0), one seeing {1,0} with no peer access between devices imports there without asking
//! for any, and an explicit import onto device 0 of another physical device than the
//! producer's device 0 enables peer access as any cross-device import does.

use devipc::{
    BackendKind, DeviceId, Error, ExportOptions, MemToken, ProcessId, Runtime, SignalToken,
};
use devipc_testkit::{Child, Parent, TestRoot, child_entry};

/// Which backend the children run (`ascend` or `hip`).
const KIND_ENV: &str = "PLACEMENT_KIND";
/// The producer's device (default 1).
const DEVICE_ENV: &str = "PLACEMENT_DEVICE";
/// What the producer writes at offset 128.
const BYTES: &[u8] = b"the producer's bytes";

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

/// Allocates on its device [`DEVICE_ENV`] (default 1), writes [`BYTES`], says the token
/// (current format and version 2), a signal token of that device and the device's
/// identity; grants each pid it is told (`grant <pid>`); `exit`.
fn producer(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let device = DeviceId(match std::env::var(DEVICE_ENV) {
        Ok(d) => d.parse().map_err(|e| format!("{DEVICE_ENV}={d}: {e}"))?,
        Err(_) => 1,
    });
    let buf = rt.allocate(device, 1 << 20).map_err(e2s)?;
    buf.write(128, BYTES).map_err(e2s)?;
    let token = buf.export(ExportOptions::granted_only()).map_err(e2s)?;
    let signal = rt.create_signal(device).map_err(e2s)?;
    let signal_token = signal.export(ExportOptions::granted_only()).map_err(e2s)?;
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

/// Says its pid; then, for `place <token>`, `signal <token>`, `v2 <token>`,
/// `import-signal <token>` and `import-at <device> <token>`, what it finds and reads (see
/// `placed`); `exit`.
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
            "import-signal" => {
                // Imported on the device it lives on here, without peer access.
                let token = SignalToken::from_text(text).map_err(e2s)?;
                let device = rt
                    .local_device_of(&token)
                    .map_err(e2s)?
                    .ok_or("the signal's device is not visible")?;
                let signal = rt.import_signal(&token, device).map_err(e2s)?;
                parent.say("signal-imported", &format!("device {}", signal.device().0));
            }
            "import-at" => {
                let (device, text) = text.split_once(' ').ok_or("import-at <device> <token>")?;
                let device = DeviceId(device.parse().map_err(|e| format!("{device}: {e}"))?);
                let token = MemToken::from_text(text).map_err(e2s)?;
                match rt.import(&token, device) {
                    Ok(view) => {
                        let mut got = vec![0u8; BYTES.len()];
                        view.read(128, &mut got).map_err(e2s)?;
                        let read = format!("read {}", String::from_utf8_lossy(&got));
                        parent.say("imported-at", &read);
                    }
                    Err(e) => parent.say("failed", &format!("{} {e}", e.kind())),
                }
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
    spawn_with(root, kind, role, Some(mask), &[])
}

/// A child on the four-device machine under `mask` (`None`: every device) with `env`.
fn spawn_with(
    root: &TestRoot,
    kind: BackendKind,
    role: &str,
    mask: Option<&str>,
    env: &[(&str, &str)],
) -> Child {
    let mut child = Child::build(&child_entry(), role, root)
        .env(KIND_ENV, kind.name())
        .env("DEVIPC_EMU_DEVICES", "4")
        .envs(env.iter().copied());
    if let Some(mask) = mask {
        child = child.env(mask_var(kind), mask);
    }
    child.spawn()
}

/// Ends every child (`exit`) and checks that the emulator holds nothing any more.
fn finish(root: &TestRoot, children: impl IntoIterator<Item = Child>) {
    for mut child in children {
        child.send("exit");
        child.wait_success();
    }
    root.assert_emulator_clean();
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

    finish(&root, [consumer, blind, producer]);
}

#[test]
fn hip_import_lands_on_the_exporters_physical_device_under_other_masks() {
    placement_under_masks(BackendKind::Hip);
}

#[test]
fn ascend_import_lands_on_the_exporters_physical_device_under_other_masks() {
    placement_under_masks(BackendKind::Ascend);
}

/// The producer's device as the consumer numbers it decides what is cross-device, never
/// the producer's own index (see the module docs).
fn renumbered_exporter_device(kind: BackendKind) {
    let read = format!("read {}", String::from_utf8_lossy(BYTES));
    // No peer access between any two devices: an import that asks for it fails.
    let root = TestRoot::new(&format!("placement-renumbered-{}", kind.name()));
    let no_peers = [("DEVIPC_EMU_PEERS", "none")];
    let mut producer = spawn_with(&root, kind, "producer", None, &no_peers);
    let identity = producer.expect("identity");
    let token = producer.expect("token");
    let _ = producer.expect("token-v2");
    let signal = producer.expect("signal");
    let mut narrow = spawn_with(&root, kind, "consumer", Some("1"), &no_peers);
    let mut swapped = spawn_with(&root, kind, "consumer", Some("1,0"), &no_peers);
    for child in [&mut narrow, &mut swapped] {
        let pid = child.expect("pid");
        producer.send(&format!("grant {pid}"));
        producer.expect("granted");
        child.send(&format!("place {token}"));
        assert_eq!(
            child.expect("placed"),
            format!("device 0 {identity}, {read}"),
            "the producer's device 1 is the consumer's device 0"
        );
        child.send(&format!("import-at 0 {token}"));
        assert_eq!(child.expect("imported-at"), read);
        child.send(&format!("import-signal {signal}"));
        assert_eq!(child.expect("signal-imported"), "device 0");
    }
    finish(&root, [narrow, swapped, producer]);

    // The same index on both sides, another physical device: a cross-device import, which
    // enables peer access (allowed here) as any does.
    let root = TestRoot::new(&format!("placement-same-index-{}", kind.name()));
    let mut producer = spawn_with(&root, kind, "producer", Some("1"), &[(DEVICE_ENV, "0")]);
    let identity = producer.expect("identity");
    let token = producer.expect("token");
    let _ = producer.expect("token-v2");
    let _ = producer.expect("signal");
    let mut other = spawn_with(&root, kind, "consumer", Some("0,1"), &[]);
    let mut blind = spawn_with(&root, kind, "consumer", Some("0"), &[]);
    for child in [&mut other, &mut blind] {
        let pid = child.expect("pid");
        producer.send(&format!("grant {pid}"));
        producer.expect("granted");
    }
    other.send(&format!("import-at 0 {token}"));
    assert_eq!(other.expect("imported-at"), read);
    other.send(&format!("place {token}"));
    assert_eq!(
        other.expect("placed"),
        format!("device 1 {identity}, {read}")
    );
    if kind == BackendKind::Ascend {
        // VMM memory of a device this process cannot see: no peer access can be enabled.
        blind.send(&format!("import-at 0 {token}"));
        let err = blind.expect_one_of(&["imported-at", "failed"]);
        assert_eq!(err.0, "failed", "{err:?}");
        assert!(err.1.contains("device_not_visible"), "{err:?}");
    }
    finish(&root, [other, blind, producer]);
}

#[test]
fn hip_a_renumbered_exporters_device_is_found_by_identity() {
    renumbered_exporter_device(BackendKind::Hip);
}

#[test]
fn ascend_a_renumbered_exporters_device_is_found_by_identity() {
    renumbered_exporter_device(BackendKind::Ascend);
}
