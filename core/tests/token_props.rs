//! Property tests for the token wire format: round trips, and total parsing of every
//! corruption (truncation, single bit flips, random bytes and text).

use devipc_core::token::{
    MAX_BINARY_LEN, MAX_PAYLOAD, MAX_TEXT_LEN, MemTokenParts, SignalTokenParts,
};
use devipc_core::{
    DeviceId, DeviceUuid, Error, HostIdentity, Mechanism, MemToken, PciBusId, PhysicalDevice,
    ProcessId, SignalToken, TokenOrigin,
};
use proptest::prelude::*;

fn origin() -> impl Strategy<Value = TokenOrigin> {
    (any::<u32>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(pid, start, ns, boot)| {
        TokenOrigin {
            pid: ProcessId(pid),
            start_time: start,
            host: HostIdentity {
                pid_namespace: ns,
                boot_id_hash: boot,
            },
        }
    })
}

/// Any physical identity, each field known or not (an all-zero UUID is "not known").
fn physical() -> impl Strategy<Value = PhysicalDevice> {
    (
        prop::option::of((any::<u32>(), any::<u8>(), 0u8..=31, 0u8..=7)),
        prop::option::of(any::<[u8; 16]>()),
        prop::option::of(any::<u32>()),
    )
        .prop_map(|(pci, uuid, physical_id)| PhysicalDevice {
            pci_bus_id: pci.map(|(d, b, dev, f)| PciBusId::new(d, b, dev, f).unwrap()),
            uuid: uuid.and_then(DeviceUuid::from_runtime),
            physical_id,
        })
}

/// A format version this devipc writes: the current one, or 2 for older peers.
fn version() -> impl Strategy<Value = u8> {
    prop::sample::select(vec![2u8, 3])
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 1..=MAX_PAYLOAD)
}

fn mem_mechanism() -> impl Strategy<Value = Mechanism> {
    prop::sample::select(
        Mechanism::ALL
            .iter()
            .copied()
            .filter(|m| !m.is_signal())
            .collect::<Vec<_>>(),
    )
}

fn signal_mechanism() -> impl Strategy<Value = Mechanism> {
    prop::sample::select(
        Mechanism::ALL
            .iter()
            .copied()
            .filter(|m| m.is_signal())
            .collect::<Vec<_>>(),
    )
}

prop_compose! {
    fn mem_token()(
        mechanism in mem_mechanism(),
        emulated in any::<bool>(),
        device in any::<u32>(),
        physical in physical(),
        origin in origin(),
        generation in any::<u64>(),
        object_size in 1..=u64::MAX,
        frac in (0.0f64..1.0, 0.0f64..1.0),
        payload in payload(),
        version in version(),
    ) -> MemToken {
        // Any offset and a non-empty length that fit in the object.
        let offset = ((object_size - 1) as f64 * frac.0) as u64;
        let room = object_size - offset;
        let len = 1 + ((room - 1) as f64 * frac.1) as u64;
        MemToken::new(MemTokenParts {
            mechanism, emulated, device: DeviceId(device), physical, origin, generation,
            object_size, offset, len, payload,
        }).expect("generated parts are valid").in_format_version(version).unwrap()
    }
}

prop_compose! {
    fn signal_token()(
        mechanism in signal_mechanism(),
        emulated in any::<bool>(),
        device in any::<u32>(),
        physical in physical(),
        origin in origin(),
        generation in any::<u64>(),
        payload in payload(),
        version in version(),
    ) -> SignalToken {
        SignalToken::new(SignalTokenParts {
            mechanism, emulated, device: DeviceId(device), physical, origin, generation, payload,
        }).expect("generated parts are valid").in_format_version(version).unwrap()
    }
}

fn is_invalid_token<T: std::fmt::Debug>(r: Result<T, Error>) -> bool {
    matches!(r, Err(Error::InvalidToken { .. }))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn mem_tokens_round_trip(t in mem_token()) {
        let bytes = t.to_bytes();
        prop_assert!(bytes.len() <= MAX_BINARY_LEN);
        prop_assert_eq!(&MemToken::from_bytes(&bytes).unwrap(), &t);
        let text = t.to_text();
        prop_assert!(text.len() <= MAX_TEXT_LEN);
        prop_assert_eq!(&MemToken::from_text(&text).unwrap(), &t);
        prop_assert_eq!(&text.parse::<MemToken>().unwrap(), &t);
        // A relay re-encodes it byte for byte, in the version it came in.
        prop_assert_eq!(MemToken::from_bytes(&bytes).unwrap().to_bytes(), bytes);
        if t.format_version() == 2 {
            prop_assert_eq!(t.physical_device(), &PhysicalDevice::UNKNOWN);
        }
    }

    #[test]
    fn signal_tokens_round_trip(t in signal_token()) {
        prop_assert_eq!(&SignalToken::from_bytes(&t.to_bytes()).unwrap(), &t);
        prop_assert_eq!(&SignalToken::from_text(&t.to_text()).unwrap(), &t);
    }

    #[test]
    fn trailing_bytes_are_rejected(t in mem_token(), extra in prop::collection::vec(any::<u8>(), 1..8)) {
        let mut b = t.to_bytes();
        b.extend_from_slice(&extra);
        prop_assert!(is_invalid_token(MemToken::from_bytes(&b)));
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        // Random input is rejected (a random CRC match is 2^-32) and never panics.
        prop_assert!(is_invalid_token(MemToken::from_bytes(&bytes)));
        prop_assert!(is_invalid_token(SignalToken::from_bytes(&bytes)));
    }

    #[test]
    fn random_bytes_behind_a_valid_magic_never_panic(
        version in 1u8..=4,
        rest in prop::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut bytes = b"DVIP".to_vec();
        bytes.push(version);
        bytes.extend_from_slice(&rest);
        prop_assert!(is_invalid_token(MemToken::from_bytes(&bytes)));
        prop_assert!(is_invalid_token(SignalToken::from_bytes(&bytes)));
    }

    #[test]
    fn random_text_never_panics(text in "\\PC{0,600}", b64 in "devipc[23]:[A-Za-z0-9_-]{0,500}") {
        prop_assert!(is_invalid_token(MemToken::from_text(&text)));
        prop_assert!(is_invalid_token(SignalToken::from_text(&text)));
        prop_assert!(is_invalid_token(MemToken::from_text(&b64)));
        prop_assert!(is_invalid_token(SignalToken::from_text(&b64)));
    }
}

proptest! {
    // Each case walks every cut or every bit of its tokens, so fewer cases suffice.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_truncation_is_rejected(t in mem_token(), s in signal_token()) {
        let mem = t.to_bytes();
        for cut in 0..mem.len() {
            prop_assert!(is_invalid_token(MemToken::from_bytes(&mem[..cut])), "mem cut at {}", cut);
        }
        let sig = s.to_bytes();
        for cut in 0..sig.len() {
            prop_assert!(is_invalid_token(SignalToken::from_bytes(&sig[..cut])), "signal cut at {}", cut);
        }
        let text = t.to_text();
        for cut in 0..text.len() {
            prop_assert!(is_invalid_token(MemToken::from_text(&text[..cut])), "text cut at {}", cut);
        }
    }

    #[test]
    fn every_single_bit_flip_is_rejected(t in mem_token(), s in signal_token()) {
        let mem = t.to_bytes();
        for bit in 0..mem.len() * 8 {
            let mut b = mem.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(is_invalid_token(MemToken::from_bytes(&b)), "mem bit {}", bit);
        }
        let sig = s.to_bytes();
        for bit in 0..sig.len() * 8 {
            let mut b = sig.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(is_invalid_token(SignalToken::from_bytes(&b)), "signal bit {}", bit);
        }
    }
}
