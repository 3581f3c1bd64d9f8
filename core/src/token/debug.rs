//! `Debug` of the tokens and their parts, with the vendor payload in hex.
//!
//! A payload is an opaque vendor handle or key (binary, up to [`MAX_PAYLOAD`](super::MAX_PAYLOAD) bytes);
//! printed as a list of decimal bytes, as `#[derive(Debug)]` would, it cannot be compared
//! with the hex a vendor tool or a hexdump shows. Every other field prints as derived.

use std::fmt;

use super::{Common, MemTokenParts, SignalTokenParts, TokenIdentity};

/// A payload's `Debug`: `0x` and every byte as two lower-case hex digits, then the length
/// (`0x6b6579 (3 bytes)`).
struct Hex<'a>(&'a [u8]);

impl fmt::Debug for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("0x")?;
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        match self.0.len() {
            1 => f.write_str(" (1 byte)"),
            n => write!(f, " ({n} bytes)"),
        }
    }
}

impl fmt::Debug for Common {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Common")
            .field("version", &self.version)
            .field("mechanism", &self.mechanism)
            .field("emulated", &self.emulated)
            .field("device", &self.device)
            .field("physical", &self.physical)
            .field("origin", &self.origin)
            .field("generation", &self.generation)
            .field("payload", &Hex(&self.payload))
            .finish()
    }
}

impl fmt::Debug for TokenIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenIdentity")
            .field("mechanism", &self.mechanism)
            .field("emulated", &self.emulated)
            .field("origin", &self.origin)
            .field("payload", &Hex(&self.payload))
            .finish()
    }
}

impl fmt::Debug for MemTokenParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemTokenParts")
            .field("mechanism", &self.mechanism)
            .field("emulated", &self.emulated)
            .field("device", &self.device)
            .field("physical", &self.physical)
            .field("origin", &self.origin)
            .field("generation", &self.generation)
            .field("object_size", &self.object_size)
            .field("offset", &self.offset)
            .field("len", &self.len)
            .field("payload", &Hex(&self.payload))
            .finish()
    }
}

impl fmt::Debug for SignalTokenParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignalTokenParts")
            .field("mechanism", &self.mechanism)
            .field("emulated", &self.emulated)
            .field("device", &self.device)
            .field("physical", &self.physical)
            .field("origin", &self.origin)
            .field("generation", &self.generation)
            .field("payload", &Hex(&self.payload))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::Hex;

    fn origin() -> TokenOrigin {
        TokenOrigin {
            pid: ProcessId(4242),
            start_time: 1,
            host: HostIdentity {
                pid_namespace: 2,
                boot_id_hash: 3,
            },
        }
    }

    fn mem_parts(payload: Vec<u8>) -> MemTokenParts {
        MemTokenParts {
            mechanism: Mechanism::AscendIpcKey,
            emulated: true,
            device: DeviceId(1),
            physical: PhysicalDevice::UNKNOWN,
            origin: origin(),
            generation: 7,
            object_size: 4096,
            offset: 0,
            len: 64,
            payload,
        }
    }

    fn signal_parts(payload: Vec<u8>) -> SignalTokenParts {
        SignalTokenParts {
            mechanism: Mechanism::AscendNotify,
            emulated: true,
            device: DeviceId(1),
            physical: PhysicalDevice::UNKNOWN,
            origin: origin(),
            generation: 7,
            payload,
        }
    }

    #[test]
    fn hex_prints_every_byte_and_the_length() {
        assert_eq!(
            format!("{:?}", Hex(&[0x3f, 0x2a, 0x00, 0xff])),
            "0x3f2a00ff (4 bytes)"
        );
        assert_eq!(format!("{:?}", Hex(&[0x0a])), "0x0a (1 byte)");
    }

    #[test]
    fn token_debug_prints_the_payload_in_hex() {
        let payload = vec![0x3f, 0x2a, 0x00, 0xff, 0x10];
        let hex = "payload: 0x3f2a00ff10 (5 bytes)";
        let decimal = "[63, 42, 0, 255, 16]";

        let mem = MemToken::new(mem_parts(payload.clone())).unwrap();
        let signal = SignalToken::new(signal_parts(payload.clone())).unwrap();
        let printed = [
            format!("{mem:?}"),
            format!("{:?}", mem.identity()),
            format!("{:?}", mem_parts(payload.clone())),
            format!("{signal:?}"),
            format!("{:?}", signal.identity()),
            format!("{:?}", signal_parts(payload)),
        ];
        for text in printed {
            assert!(text.contains(hex), "{text}");
            assert!(!text.contains(decimal), "{text}");
        }
        // The other fields still print as derived.
        let mem = format!("{mem:?}");
        assert!(
            mem.starts_with("MemToken { common: Common { version: 3, "),
            "{mem}"
        );
        assert!(mem.contains("generation: 7"), "{mem}");
        assert!(
            mem.ends_with("object_size: 4096, offset: 0, len: 64 }"),
            "{mem}"
        );
    }
}
