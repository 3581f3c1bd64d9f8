//! The exported macros, used from outside the crate the way the emulator uses them.
//!
//! A module of Rust functions generated from `for_each_hip_fn!` records which function
//! ran. `hip_api_from_module!` must wire every `HipApi` field to the function of its
//! name, and `hip_export_c_abi!` must emit a C symbol per function forwarding to it; the
//! test calls every field and every symbol (through an `extern "C"` block generated from
//! the same list), so a missing, misnamed or mis-wired entry fails. Not built with
//! feature `link`: the exported wrappers would interpose on the linked runtime's symbols.
//! (The one test of `hip_api_from_module!`: the crate's unit tests no longer repeat it.)
#![allow(non_snake_case)]

use std::cell::Cell;
use std::ffi::CStr;

use devipc_hip_sys::types::*;
use devipc_hip_sys::{HipApi, for_each_hip_fn};

thread_local! {
    static LAST: Cell<&'static str> = const { Cell::new("") };
}

fn code_of(name: &str) -> hipError_t {
    2000 + HipApi::REQUIRED_SYMBOLS
        .iter()
        .chain(HipApi::OPTIONAL_SYMBOLS)
        .position(|n| *n == name)
        .expect("listed") as hipError_t
}

trait Ret {
    fn make(name: &'static str, c_name: &'static CStr) -> Self;
    fn check(self, name: &str);
}
impl Ret for hipError_t {
    fn make(name: &'static str, _: &'static CStr) -> Self {
        code_of(name)
    }
    fn check(self, name: &str) {
        assert_eq!(self, code_of(name), "{name}");
    }
}
impl Ret for *const c_char {
    fn make(_: &'static str, c_name: &'static CStr) -> Self {
        c_name.as_ptr()
    }
    fn check(self, name: &str) {
        // SAFETY: the recording functions return a static NUL-terminated string.
        assert_eq!(unsafe { CStr::from_ptr(self) }.to_str().unwrap(), name);
    }
}

/// Rust functions with the table's signatures, recording which one ran.
mod emu {
    use super::*;

    macro_rules! recording_fns {
        (
            []
            required { $( $(#[$d:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; )* }
            optional { $( $(#[$od:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
        ) => {
            $(
                pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                    $( let _ = $arg; )*
                    LAST.with(|l| l.set(stringify!($name)));
                    <$ret as Ret>::make(
                        stringify!($name),
                        // SAFETY: the literal ends in exactly one NUL.
                        unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) },
                    )
                }
            )*
            $(
                pub unsafe extern "C" fn $oname($($oarg: $oty),*) -> $oret {
                    $( let _ = $oarg; )*
                    LAST.with(|l| l.set(stringify!($oname)));
                    <$oret as Ret>::make(
                        stringify!($oname),
                        // SAFETY: the literal ends in exactly one NUL.
                        unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($oname), "\0").as_bytes()) },
                    )
                }
            )*
        };
    }
    for_each_hip_fn!(recording_fns);
}

devipc_hip_sys::hip_export_c_abi!(crate::macros::emu);

/// The exported symbols, declared by their C names under a `c_` prefix.
mod c {
    use super::*;

    macro_rules! declare_c {
        (
            []
            required { $( $(#[$d:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; )* }
            optional { $( $(#[$od:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
        ) => {
            unsafe extern "C" {
                $(
                    #[link_name = stringify!($name)]
                    pub fn $name($($arg: $ty),*) -> $ret;
                )*
                $(
                    #[link_name = stringify!($oname)]
                    pub fn $oname($($oarg: $oty),*) -> $oret;
                )*
            }
        };
    }
    for_each_hip_fn!(declare_c);
}

macro_rules! call_every_field {
    (
        [$api:ident]
        required { $( $(#[$d:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; )* }
        optional { $( $(#[$od:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
    ) => {
        $(
            LAST.with(|l| l.set(""));
            // SAFETY: the fields are the recording functions, which ignore their
            // arguments; all-zero bytes are valid for every argument type.
            let ret: $ret = unsafe { ($api.$name)($(core::mem::zeroed::<$ty>()),*) };
            assert_eq!(LAST.with(|l| l.get()), stringify!($name));
            ret.check(stringify!($name));
        )*
        $(
            LAST.with(|l| l.set(""));
            let f = $api.$oname.expect(concat!(stringify!($oname), " is wired"));
            // SAFETY: as above.
            let ret: $oret = unsafe { f($(core::mem::zeroed::<$oty>()),*) };
            assert_eq!(LAST.with(|l| l.get()), stringify!($oname));
            ret.check(stringify!($oname));
        )*
    };
}

#[test]
fn hip_api_from_module_wires_every_field_to_the_function_of_its_name() {
    // SAFETY: test only; the recording functions dereference nothing.
    let api = unsafe { devipc_hip_sys::hip_api_from_module!(crate::macros::emu) };
    assert!(api.source().is_emulated());
    assert_eq!(api.source(), &devipc_core::LibrarySource::Emulated);
    for_each_hip_fn!(call_every_field; api);
    // A table filled from Rust functions owns no library.
    let debug = format!("{api:?}");
    assert!(debug.contains("Emulated"), "{debug}");
    assert!(debug.contains("owns_library: false"), "{debug}");
}

macro_rules! call_every_symbol {
    (
        []
        required { $( $(#[$d:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; )* }
        optional { $( $(#[$od:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
    ) => {
        $(
            LAST.with(|l| l.set(""));
            // SAFETY: the symbols are the wrappers above, forwarding to recording
            // functions that ignore their arguments; all-zero bytes are valid for every
            // argument type (integers, raw pointers, handles).
            let ret: $ret = unsafe { c::$name($(core::mem::zeroed::<$ty>()),*) };
            assert_eq!(LAST.with(|l| l.get()), stringify!($name));
            ret.check(stringify!($name));
        )*
        $(
            LAST.with(|l| l.set(""));
            // SAFETY: as above.
            let ret: $oret = unsafe { c::$oname($(core::mem::zeroed::<$oty>()),*) };
            assert_eq!(LAST.with(|l| l.get()), stringify!($oname));
            ret.check(stringify!($oname));
        )*
    };
}

#[test]
fn every_c_symbol_forwards_to_the_rust_function_of_its_name() {
    for_each_hip_fn!(call_every_symbol);
}
