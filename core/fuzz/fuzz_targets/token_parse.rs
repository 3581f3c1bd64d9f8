//! Fuzzes the token parsers: any input must give a token or `InvalidToken`, never a
//! panic, and a token that parses must re-encode to exactly the input.
#![no_main]

use devipc_core::{Error, MemToken, SignalToken};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match MemToken::from_bytes(data) {
        Ok(t) => assert_eq!(t.to_bytes(), data),
        Err(e) => assert!(matches!(e, Error::InvalidToken { .. })),
    }
    match SignalToken::from_bytes(data) {
        Ok(t) => assert_eq!(t.to_bytes(), data),
        Err(e) => assert!(matches!(e, Error::InvalidToken { .. })),
    }
    if let Ok(text) = std::str::from_utf8(data) {
        match MemToken::from_text(text) {
            Ok(t) => assert_eq!(MemToken::from_text(&t.to_text()).unwrap(), t),
            Err(e) => assert!(matches!(e, Error::InvalidToken { .. })),
        }
        if let Err(e) = SignalToken::from_text(text) {
            assert!(matches!(e, Error::InvalidToken { .. }));
        }
    }
});
