//! Unit tests of the wire format: layout, versions, corruption reasons.
use super::*;
use crate::physical::{DeviceUuid, PciBusId};

fn origin() -> TokenOrigin {
    TokenOrigin {
        pid: ProcessId(4242),
        start_time: 987_654,
        host: HostIdentity {
            pid_namespace: 4026531836,
            boot_id_hash: 0x1234_5678_9abc_def0,
        },
    }
}

fn physical() -> PhysicalDevice {
    PhysicalDevice {
        pci_bus_id: Some(PciBusId::new(0x1a2b, 0x13, 2, 1).unwrap()),
        uuid: Some(DeviceUuid([0xab; 16])),
        physical_id: Some(3),
    }
}

fn mem() -> MemToken {
    MemToken::new(MemTokenParts {
        mechanism: Mechanism::AscendIpcKey,
        emulated: true,
        device: DeviceId(1),
        physical: physical(),
        origin: origin(),
        generation: 7,
        object_size: 4096,
        offset: 512,
        len: 1024,
        payload: b"key\0with\0nul".to_vec(),
    })
    .unwrap()
}

#[test]
fn crc32_check_value() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
}

#[test]
fn golden_layout_is_stable() {
    let bytes = mem().to_bytes();
    assert_eq!(
        &bytes[..12],
        &[b'D', b'V', b'I', b'P', 3, 1, 1, 2, 1, 0, 12, 0]
    );
    assert_eq!(u32::from_le_bytes(bytes[12..16].try_into().unwrap()), 1);
    assert_eq!(u32::from_le_bytes(bytes[16..20].try_into().unwrap()), 4242);
    assert_eq!(
        u64::from_le_bytes(bytes[36..44].try_into().unwrap()),
        987_654
    );
    assert_eq!(u64::from_le_bytes(bytes[44..52].try_into().unwrap()), 7);
    // The physical identity block: known PCI | UUID | physical id, the PCI address, the
    // physical id, the UUID.
    assert_eq!(&bytes[52..56], &[0x07, 0, 0, 0]);
    assert_eq!(&bytes[56..64], &[0x2b, 0x1a, 0, 0, 0x13, 2, 1, 0]);
    assert_eq!(u32::from_le_bytes(bytes[64..68].try_into().unwrap()), 3);
    assert_eq!(&bytes[68..84], &[0xab; 16]);
    assert_eq!(u64::from_le_bytes(bytes[84..92].try_into().unwrap()), 4096);
    assert_eq!(u64::from_le_bytes(bytes[92..100].try_into().unwrap()), 512);
    assert_eq!(&bytes[108..120], b"key\0with\0nul");
    assert_eq!(bytes.len(), 108 + 12 + 4);
}

#[test]
fn an_unknown_identity_is_all_zeros_and_round_trips() {
    let mut parts = mem().to_parts();
    parts.physical = PhysicalDevice::UNKNOWN;
    let t = MemToken::new(parts.clone()).unwrap();
    let bytes = t.to_bytes();
    assert_eq!(&bytes[52..84], &[0; 32]);
    assert_eq!(MemToken::from_bytes(&bytes).unwrap(), t);
    // Each field alone.
    for physical in [
        PhysicalDevice {
            physical_id: Some(0),
            ..PhysicalDevice::UNKNOWN
        },
        PhysicalDevice {
            pci_bus_id: Some(PciBusId::new(0, 0, 0, 0).unwrap()),
            ..PhysicalDevice::UNKNOWN
        },
        PhysicalDevice {
            uuid: Some(DeviceUuid([1; 16])),
            ..PhysicalDevice::UNKNOWN
        },
    ] {
        parts.physical = physical;
        let t = MemToken::new(parts.clone()).unwrap();
        let back = MemToken::from_text(&t.to_text()).unwrap();
        assert_eq!(back.physical_device(), &physical);
    }
}

#[test]
fn a_physical_identity_has_one_encoding() {
    let good = mem().to_bytes();
    let reason = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        edit(&mut b);
        // Recompute the CRC: these are edits an attacker makes, not accidents.
        let n = b.len() - 4;
        let crc = crc32(&b[..n]);
        b[n..].copy_from_slice(&crc.to_le_bytes());
        MemToken::from_bytes(&b).unwrap_err().to_string()
    };
    assert!(reason(&|b| b[52] |= 0x08).contains("reserved bits"));
    assert!(reason(&|b| b[53] = 1).contains("reserved bits"));
    assert!(reason(&|b| b[63] = 1).contains("reserved byte"));
    assert!(reason(&|b| b[61] = 32).contains("out of range"));
    assert!(reason(&|b| b[62] = 8).contains("out of range"));
    assert!(reason(&|b| b[52] = 0x06).contains("PCI bytes"));
    assert!(reason(&|b| b[52] = 0x03).contains("physical id"));
    assert!(reason(&|b| b[52] = 0x05).contains("UUID bytes"));
    let zero_uuid = reason(&|b| b[68..84].fill(0));
    assert!(zero_uuid.contains("all-zero UUID"), "{zero_uuid}");
}

/// Tokens written by devipc before format version 3 (issue 16), kept as text: the memory
/// token is a HIP IPC handle of device 1, the signal an Ascend notify key of device 3.
const V2_MEM: &str = "devipc2:RFZJUAIBAgQBAEAAAQAAAJIQAAD8___vAAAAAPDevJp4VjQSBhIPAAAAAAAHAAAAAAAAAAAQAAAAAAAAAAIAAAAAAAAABAAAAAAAAAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4fICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj_lioR-";
const V2_SIGNAL: &str = "devipc2:RFZJUAICAQMAAAwAAwAAAJIQAAD8___vAAAAAPDevJp4VjQSBhIPAAAAAAAJAAAAAAAAAG5vdGlmeS1rZXkAeMVGQpE";

#[test]
fn version_2_tokens_still_parse_with_the_identity_unknown_and_round_trip() {
    let m = MemToken::from_text(V2_MEM).unwrap();
    assert_eq!(m.format_version(), 2);
    assert_eq!(m.mechanism(), Mechanism::HipIpcMem);
    assert!(m.emulated());
    assert_eq!(m.device(), DeviceId(1));
    assert_eq!(m.physical_device(), &PhysicalDevice::UNKNOWN);
    assert_eq!(m.origin(), origin());
    assert_eq!((m.generation(), m.object_size()), (7, 4096));
    assert_eq!((m.offset(), m.len()), (512, 1024));
    assert_eq!(m.payload(), (0u8..64).collect::<Vec<_>>());
    // A relay that parses and prints it again does not change it.
    assert_eq!(m.to_text(), V2_MEM);
    assert_eq!(MemToken::from_bytes(&m.to_bytes()).unwrap(), m);
    // Narrowing keeps the version.
    assert!(m.narrow(0, 10).unwrap().to_text().starts_with("devipc2:"));

    let s = SignalToken::from_text(V2_SIGNAL).unwrap();
    assert_eq!(s.format_version(), 2);
    assert_eq!(s.mechanism(), Mechanism::AscendNotify);
    assert_eq!(s.device(), DeviceId(3));
    assert_eq!(s.generation(), 9);
    assert_eq!(s.payload(), b"notify-key\0x");
    assert_eq!(s.physical_device(), &PhysicalDevice::UNKNOWN);
    assert_eq!(s.to_text(), V2_SIGNAL);

    // Written again in version 3 it is the same token, identity unknown.
    let v3 = m.in_format_version(3).unwrap();
    assert!(v3.to_text().starts_with("devipc3:"));
    assert_eq!(v3.identity(), m.identity());
    assert_eq!(MemToken::from_text(&v3.to_text()).unwrap(), v3);
}

#[test]
fn a_new_token_can_be_written_for_an_older_devipc() {
    let t = mem();
    let v2 = t.in_format_version(2).unwrap();
    assert_eq!(v2.physical_device(), &PhysicalDevice::UNKNOWN);
    assert_eq!(v2.to_bytes().len(), 76 + 12 + 4);
    assert!(v2.to_text().starts_with("devipc2:"));
    assert_eq!(MemToken::from_text(&v2.to_text()).unwrap(), v2);
    assert_eq!(v2.identity(), t.identity());
    for bad in [0, 1, 4, 255] {
        assert!(matches!(
            t.in_format_version(bad),
            Err(Error::InvalidArgument { .. })
        ));
    }
}

#[test]
fn the_text_prefix_must_match_the_version_inside() {
    let v3_body = &mem().to_text()["devipc3:".len()..];
    let err = MemToken::from_text(&format!("devipc2:{v3_body}"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("prefix says format version 2"), "{err}");
    let v2_body = &V2_MEM["devipc2:".len()..];
    let err = MemToken::from_text(&format!("devipc3:{v2_body}"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("prefix says format version 3"), "{err}");
}

#[test]
fn round_trips_and_keeps_nul_bytes() {
    let t = mem();
    assert_eq!(MemToken::from_bytes(&t.to_bytes()).unwrap(), t);
    let text = t.to_text();
    assert!(text.starts_with("devipc3:"));
    assert!(
        text[8..]
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
    );
    assert_eq!(text.parse::<MemToken>().unwrap(), t);
    assert_eq!(format!("  {t}\n").parse::<MemToken>().unwrap(), t);
    assert_eq!(t.payload(), b"key\0with\0nul");
}

#[test]
fn rejects_inconsistent_parts() {
    let mut parts = MemTokenParts {
        mechanism: Mechanism::HipIpcEvent,
        emulated: false,
        device: DeviceId(0),
        physical: PhysicalDevice::UNKNOWN,
        origin: origin(),
        generation: 1,
        object_size: 10,
        offset: 0,
        len: 10,
        payload: vec![1; 64],
    };
    assert!(matches!(
        MemToken::new(parts.clone()),
        Err(Error::InvalidToken { .. })
    ));
    parts.mechanism = Mechanism::HipIpcMem;
    assert!(MemToken::new(parts.clone()).is_ok());
    parts.offset = 1;
    assert!(MemToken::new(parts.clone()).is_err());
    parts.offset = 0;
    parts.len = 0;
    assert!(MemToken::new(parts.clone()).is_err());
    parts.len = 10;
    parts.payload = vec![0; MAX_PAYLOAD + 1];
    assert!(MemToken::new(parts.clone()).is_err());
    parts.payload.clear();
    assert!(MemToken::new(parts).is_err());
}

#[test]
fn memory_and_signal_tokens_are_not_interchangeable() {
    let s = SignalToken::new(SignalTokenParts {
        mechanism: Mechanism::AscendNotify,
        emulated: false,
        device: DeviceId(0),
        physical: PhysicalDevice::UNKNOWN,
        origin: origin(),
        generation: 3,
        payload: vec![b'n'; 65],
    })
    .unwrap();
    let err = MemToken::from_bytes(&s.to_bytes()).unwrap_err().to_string();
    assert!(err.contains("signal token, not a memory token"), "{err}");
    let err = SignalToken::from_text(&mem().to_text())
        .unwrap_err()
        .to_string();
    assert!(err.contains("memory token, not a signal token"), "{err}");
    assert_eq!(SignalToken::from_text(&s.to_text()).unwrap(), s);
}

#[test]
fn narrow_keeps_identity_and_checks_bounds() {
    let t = mem();
    let n = t.narrow(100, 24).unwrap();
    assert_eq!((n.offset(), n.len()), (612, 24));
    assert_eq!(n.identity(), t.identity());
    assert_eq!(n.generation(), t.generation());
    assert!(t.narrow(1000, 25).is_err());
    assert!(t.narrow(0, 0).is_err());
    assert!(t.narrow(u64::MAX, 2).is_err());
}

#[test]
fn reasons_name_the_problem() {
    let reason = |r: Result<MemToken>| r.unwrap_err().to_string();
    assert!(reason(MemToken::from_text("hello")).contains("does not start with"));
    assert!(reason(MemToken::from_text("devipc9:AAAA")).contains("unsupported text format"));
    let old = reason(MemToken::from_text("devipc1:AAAA"));
    assert!(old.contains("older devipc"), "{old}");
    assert!(reason(MemToken::from_text("devipc3:***")).contains("bad base64"));
    assert!(reason(MemToken::from_text("devipc2:***")).contains("bad base64"));
    let mut b = mem().to_bytes();
    b[4] = 1;
    let v1 = reason(MemToken::from_bytes(&b));
    assert!(
        v1.contains("format version 1") && v1.contains("older devipc"),
        "{v1}"
    );
    b[4] = 4;
    let v4 = reason(MemToken::from_bytes(&b));
    assert!(v4.contains("newer devipc"), "{v4}");
    let mut b = mem().to_bytes();
    let last = b.len() - 1;
    b[last] ^= 1;
    assert!(reason(MemToken::from_bytes(&b)).contains("checksum"));
    let long = format!("devipc3:{}", "A".repeat(MAX_TEXT_LEN));
    assert!(reason(MemToken::from_text(&long)).contains("longer than any token"));
}
