//! The exported macros, used from outside the crate the way the emulator uses them:
//! a module of `extern "C"` functions generated from `for_each_acl_fn!`, turned into an
//! `AclApi` with `acl_api_from_module!` and exported under the vendor names with
//! `acl_export_c_abi!`. Each function records its own name, so the tests show that every
//! table field and every export reaches the function of the same name.

use std::cell::RefCell;
use std::ffi::{CStr, c_char};

use devipc_ascend_sys::abi;
use devipc_ascend_sys::types::aclError;
use devipc_ascend_sys::{AclApi, acl_api_from_module, acl_export_c_abi, for_each_acl_fn};

thread_local! {
    static CALLS: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
}

fn take_calls() -> Vec<&'static str> {
    CALLS.with(|c| std::mem::take(&mut *c.borrow_mut()))
}

/// A value of each return type of the list.
trait Returned {
    fn returned() -> Self;
}

impl Returned for aclError {
    fn returned() -> Self {
        0
    }
}

impl Returned for *const c_char {
    fn returned() -> Self {
        c"recorded".as_ptr()
    }
}

/// A harmless argument of each parameter type of the list (null / zero).
trait Zero {
    fn zero() -> Self;
}

impl<T> Zero for *mut T {
    fn zero() -> Self {
        std::ptr::null_mut()
    }
}

impl<T> Zero for *const T {
    fn zero() -> Self {
        std::ptr::null()
    }
}

macro_rules! zero_ints {
    ($($t:ty),*) => { $(impl Zero for $t { fn zero() -> Self { 0 } })* };
}
zero_ints!(i32, u32, u64, usize);

impl Zero for devipc_ascend_sys::types::aclrtIpcEventHandle {
    fn zero() -> Self {
        Self::default()
    }
}

/// Defines one recording function per list entry, with the list's signature.
macro_rules! recording_module {
    (
        []
        required { $( $(#[$rd:meta])* fn $r:ident ( $($rp:ident : $rt:ty),* ) -> $rr:ty ; )* }
        optional { $( $(#[$od:meta])* fn $o:ident ( $($op:ident : $ot:ty),* ) -> $or:ty ; )* }
    ) => {
        /// One recording function per list entry.
        #[allow(non_snake_case, clippy::missing_safety_doc)]
        pub mod recording {
            use super::*;
            use devipc_ascend_sys::types::*;
            $(
                $(#[$rd])*
                pub unsafe extern "C" fn $r($(_: $rt),*) -> $rr {
                    CALLS.with(|c| c.borrow_mut().push(stringify!($r)));
                    <$rr as Returned>::returned()
                }
            )*
            $(
                $(#[$od])*
                pub unsafe extern "C" fn $o($(_: $ot),*) -> $or {
                    CALLS.with(|c| c.borrow_mut().push(stringify!($o)));
                    <$or as Returned>::returned()
                }
            )*
        }
    };
}
for_each_acl_fn!(recording_module);

/// Calls every field of an `AclApi` once, in list order, with null/zero arguments.
macro_rules! call_every_field {
    (
        [$api:ident]
        required { $( $(#[$rd:meta])* fn $r:ident ( $($rp:ident : $rt:ty),* ) -> $rr:ty ; )* }
        optional { $( $(#[$od:meta])* fn $o:ident ( $($op:ident : $ot:ty),* ) -> $or:ty ; )* }
    ) => {{
        #[allow(unused_imports)]
        use devipc_ascend_sys::types::*;
        $(
            // SAFETY: the recording functions ignore their arguments.
            let _ = unsafe { ($api.$r)($(<$rt as Zero>::zero()),*) };
        )*
        $(
            let f = $api.$o.expect(stringify!($o));
            // SAFETY: as above.
            let _ = unsafe { f($(<$ot as Zero>::zero()),*) };
        )*
    }};
}

acl_export_c_abi!(recording);

#[test]
fn from_module_fills_every_field_with_the_same_named_function() {
    // SAFETY: the `recording` module implements every listed function with the table's
    // exact prototype (a mismatch would not compile) and writes only the
    // out-parameters it is given.
    let api: AclApi = unsafe { acl_api_from_module!(recording) };
    assert!(api.source().is_emulated());
    assert!(api.missing_optional().is_empty());
    take_calls();
    for_each_acl_fn!(call_every_field; api);
    let expected: Vec<_> = abi::FUNCTIONS.iter().map(|f| f.name).collect();
    assert_eq!(take_calls(), expected);
}

#[test]
fn an_optional_field_can_be_cleared_to_emulate_an_older_runtime() {
    // SAFETY: the `recording` module implements every listed function with the table's
    // exact prototype (a mismatch would not compile) and writes only the
    // out-parameters it is given.
    let mut api = unsafe { acl_api_from_module!(crate::macros::recording) };
    api.aclrtIpcMemGetExportKey = None;
    api.aclrtDeviceGetBareTgid = None;
    assert_eq!(
        api.missing_optional(),
        ["aclrtIpcMemGetExportKey", "aclrtDeviceGetBareTgid"]
    );
    assert!(format!("{api:?}").contains("aclrtDeviceGetBareTgid"));
}

mod exported {
    use devipc_ascend_sys::types::*;

    // The unmangled symbols `acl_export_c_abi!` defined in this test binary.
    unsafe extern "C" {
        pub fn aclInit(configPath: *const c_char) -> aclError;
        pub fn aclGetRecentErrMsg() -> *const c_char;
        pub fn aclrtGetDeviceCount(count: *mut u32) -> aclError;
        pub fn aclrtNotifyImportByKey(
            notify: *mut aclrtNotify,
            key: *const c_char,
            flags: u64,
        ) -> aclError;
    }
}

#[test]
fn exported_symbols_forward_to_the_module() {
    take_calls();
    // SAFETY: the exports forward to the recording functions, which ignore arguments.
    unsafe {
        assert_eq!(exported::aclInit(std::ptr::null()), 0);
        let msg = exported::aclGetRecentErrMsg();
        assert_eq!(CStr::from_ptr(msg), c"recorded");
        let mut n = 0u32;
        assert_eq!(exported::aclrtGetDeviceCount(&mut n), 0);
        let mut notify = std::ptr::null_mut();
        assert_eq!(
            exported::aclrtNotifyImportByKey(&mut notify, c"k".as_ptr(), 0),
            0
        );
    }
    assert_eq!(
        take_calls(),
        [
            "aclInit",
            "aclGetRecentErrMsg",
            "aclrtGetDeviceCount",
            "aclrtNotifyImportByKey"
        ]
    );
}
