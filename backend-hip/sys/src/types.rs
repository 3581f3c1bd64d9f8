//! C types of the HIP runtime API that devipc passes across the FFI boundary.
//!
//! These mirror `hip/hip_runtime_api.h` and `hip/driver_types.h` (HIP 5.2 as packaged by
//! Debian, identical in ROCm 6.x and 7.x for everything here; api-facts B.2, B.3). They are
//! plain data: the [`HipApi`](crate::HipApi) function table takes and returns them, the
//! backend stores them, and the 64-byte IPC handles travel inside devipc tokens.
//!
//! The names are the C names on purpose, so the [`for_each_hip_fn!`](crate::for_each_hip_fn)
//! list reads like the C prototypes. `use devipc_hip_sys::types::*;` brings every name the
//! list uses into scope, including the `c_*` integer aliases.

use core::fmt;
use core::marker::{PhantomData, PhantomPinned};

pub use core::ffi::{c_char, c_int, c_uint, c_void};

/// HIP status code, `typedef enum hipError_t` in C.
///
/// A plain `c_int`, not a Rust enum: a runtime newer than these bindings may return codes
/// that no Rust enum here lists (HIP 7 added several), and a Rust enum holding an unlisted
/// value is undefined behaviour. The C enum is 4 bytes on every supported target (checked
/// with `sizeof` on the 5.2 and 6.2 headers, api-facts B.3); GCC gives it an `unsigned int`
/// underlying type, which the C ABI passes and returns exactly like `int`.
/// The values are in [`consts`](crate::consts).
pub type hipError_t = c_int;

/// Copy direction for `hipMemcpy`, `typedef enum hipMemcpyKind` in C (4 bytes).
///
/// A `c_int` for the same reason as [`hipError_t`]; the values are the `hipMemcpy*`
/// constants in [`consts`](crate::consts).
pub type hipMemcpyKind = c_int;

/// Opaque runtime stream object; only ever used behind [`hipStream_t`].
#[repr(C)]
pub struct ihipStream_t {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Opaque runtime event object; only ever used behind [`hipEvent_t`].
#[repr(C)]
pub struct ihipEvent_t {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// A HIP stream, `typedef struct ihipStream_t* hipStream_t`. Null is the default stream.
pub type hipStream_t = *mut ihipStream_t;

/// A HIP event, `typedef struct ihipEvent_t* hipEvent_t`.
pub type hipEvent_t = *mut ihipEvent_t;

/// Opaque runtime context object; only ever used behind [`hipCtx_t`].
#[repr(C)]
pub struct ihipCtx_t {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// A HIP context (deprecated driver-style API), `typedef struct ihipCtx_t* hipCtx_t`. In
/// CLR it is the device's primary context (`hipCtxCreate` hands out the device itself).
pub type hipCtx_t = *mut ihipCtx_t;

/// A device ordinal as the driver-style API spells it, `typedef int hipDevice_t`.
pub type hipDevice_t = c_int;

/// `enum hipMemoryType` (4 bytes). A `c_int` because the **values changed** between ROCm
/// 5.x and 6.0 (api-facts B.3): use
/// [`memory_type_value`](crate::consts::memory_type_value) /
/// [`memory_type_kind`](crate::consts::memory_type_kind) with the runtime version.
pub type hipMemoryType = c_int;

/// `enum hipDriverProcAddressQueryResult` (ROCm 6.2+): what `hipGetProcAddress` found,
/// `HIP_GET_PROC_ADDRESS_*` in [`consts`](crate::consts).
pub type hipDriverProcAddressQueryResult = c_int;

/// `hipPointerAttribute_t`, written by `hipPointerGetAttributes`: 32 bytes on x86_64 in
/// both ROCm 5.2 and 6.x (measured with `offsetof` on Debian's 5.2 header: type @0,
/// device @4, devicePointer @8, hostPointer @16, isManaged @24, allocationFlags @28).
///
/// The layout is the same in every version, but the first field is not: ROCm 5.2 names
/// it `memoryType`, 5.7 puts `memoryType` and `type` in a union, 6.0 keeps only `type`
/// (clr CHANGELOG 6.0: "Deprecated `enum hipMemoryType memoryType;` is removed from HIP
/// struct hipPointerAttribute_t union"), and the enum's **values** differ (5.x: Host 0,
/// Device 1; 6.x: Unregistered 0, Host 1, Device 2; api-facts B.3). This struct names the
/// field after 6.x (`type`); read it with
/// [`memory_type_kind`](crate::consts::memory_type_kind) and the runtime version.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_snake_case)] // the C field names
pub struct hipPointerAttribute_t {
    /// `type` (6.x) / `memoryType` (5.x): a [`hipMemoryType`] value of the running version.
    pub r#type: hipMemoryType,
    /// The device ordinal of the allocation (6.x: `hipInvalidDeviceId` for unregistered
    /// memory).
    pub device: c_int,
    /// The device address of `ptr` (interior offset kept).
    pub devicePointer: *mut c_void,
    /// The host address of `ptr` for host memory, else NULL.
    pub hostPointer: *mut c_void,
    /// Non-zero for managed (`hipMallocManaged`) memory.
    pub isManaged: c_int,
    /// Allocation flags (e.g. those given to `hipHostMalloc`).
    pub allocationFlags: c_uint,
}

impl hipPointerAttribute_t {
    /// All zero (NULL pointers), for use as an out-parameter.
    pub const fn zeroed() -> Self {
        hipPointerAttribute_t {
            r#type: 0,
            device: 0,
            devicePointer: core::ptr::null_mut(),
            hostPointer: core::ptr::null_mut(),
            isManaged: 0,
            allocationFlags: 0,
        }
    }
}

impl Default for hipPointerAttribute_t {
    fn default() -> Self {
        Self::zeroed()
    }
}

/// A device pointer as the driver-style API spells it, `typedef void* hipDeviceptr_t`.
///
/// Used by `hipMemGetAddressRange`, whose first parameter is `hipDeviceptr_t*` (a
/// `void**`), not `void**` spelled out.
pub type hipDeviceptr_t = *mut c_void;

/// Size in bytes of both IPC handles, `#define HIP_IPC_HANDLE_SIZE 64`.
pub const HIP_IPC_HANDLE_SIZE: usize = 64;

macro_rules! ipc_handle {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name {
            /// The opaque handle bytes, `char reserved[HIP_IPC_HANDLE_SIZE]`.
            pub reserved: [c_char; HIP_IPC_HANDLE_SIZE],
        }

        impl $name {
            /// A handle of all zero bytes, for use as an out-parameter. The runtime
            /// rejects it on open (`hipErrorInvalidValue`).
            pub const fn zeroed() -> Self {
                $name {
                    reserved: [0; HIP_IPC_HANDLE_SIZE],
                }
            }

            /// A handle from its bytes, e.g. the payload of a received devipc token.
            pub const fn from_bytes(bytes: [u8; HIP_IPC_HANDLE_SIZE]) -> Self {
                let mut reserved = [0 as c_char; HIP_IPC_HANDLE_SIZE];
                let mut i = 0;
                while i < HIP_IPC_HANDLE_SIZE {
                    // `c_char` is `i8` or `u8` depending on the target: reinterpret the bits.
                    reserved[i] = bytes[i] as c_char;
                    i += 1;
                }
                $name { reserved }
            }

            /// The handle's bytes, e.g. to put into a devipc token.
            pub const fn to_bytes(&self) -> [u8; HIP_IPC_HANDLE_SIZE] {
                let mut bytes = [0u8; HIP_IPC_HANDLE_SIZE];
                let mut i = 0;
                while i < HIP_IPC_HANDLE_SIZE {
                    // Reinterpret the bits of a signed or unsigned `c_char`.
                    bytes[i] = self.reserved[i] as u8;
                    i += 1;
                }
                bytes
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::zeroed()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "("))?;
                for b in self.to_bytes() {
                    write!(f, "{b:02x}")?;
                }
                f.write_str(")")
            }
        }
    };
}

ipc_handle! {
    /// Opaque inter-process memory handle, `hipIpcMemHandle_t` (64 bytes).
    ///
    /// Written by `hipIpcGetMemHandle` and passed **by value** to `hipIpcOpenMemHandle`
    /// (api-facts B.2). It always names the whole allocation: opening it returns the base
    /// pointer, so the exporter must send the offset separately (api-facts C.1).
    hipIpcMemHandle_t
}

ipc_handle! {
    /// Opaque inter-process event handle, `hipIpcEventHandle_t` (64 bytes).
    ///
    /// Written by `hipIpcGetEventHandle` for an event created with
    /// `hipEventInterprocess | hipEventDisableTiming`, passed by value to
    /// `hipIpcOpenEventHandle` (api-facts B.2, C.2).
    hipIpcEventHandle_t
}

const _: () = {
    assert!(size_of::<hipIpcMemHandle_t>() == HIP_IPC_HANDLE_SIZE);
    assert!(align_of::<hipIpcMemHandle_t>() == 1);
    assert!(size_of::<hipIpcEventHandle_t>() == HIP_IPC_HANDLE_SIZE);
    assert!(align_of::<hipIpcEventHandle_t>() == 1);
    assert!(size_of::<hipError_t>() == 4);
    assert!(size_of::<hipMemcpyKind>() == 4);
    assert!(size_of::<hipStream_t>() == size_of::<*mut c_void>());
    assert!(size_of::<hipEvent_t>() == size_of::<*mut c_void>());
    assert!(size_of::<hipCtx_t>() == size_of::<*mut c_void>());
    assert!(size_of::<hipPointerAttribute_t>() == 32);
    assert!(core::mem::offset_of!(hipPointerAttribute_t, device) == 4);
    assert!(core::mem::offset_of!(hipPointerAttribute_t, devicePointer) == 8);
    assert!(core::mem::offset_of!(hipPointerAttribute_t, hostPointer) == 16);
    assert!(core::mem::offset_of!(hipPointerAttribute_t, isManaged) == 24);
    assert!(core::mem::offset_of!(hipPointerAttribute_t, allocationFlags) == 28);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_64_bytes_and_round_trip_their_bytes() {
        assert_eq!(size_of::<hipIpcMemHandle_t>(), 64);
        assert_eq!(size_of::<hipIpcEventHandle_t>(), 64);
        let mut bytes = [0u8; HIP_IPC_HANDLE_SIZE];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37).wrapping_add(200);
        }
        let h = hipIpcMemHandle_t::from_bytes(bytes);
        assert_eq!(h.to_bytes(), bytes);
        let e = hipIpcEventHandle_t::from_bytes(bytes);
        assert_eq!(e.to_bytes(), bytes);
        assert_eq!(hipIpcMemHandle_t::default(), hipIpcMemHandle_t::zeroed());
        assert_eq!(hipIpcMemHandle_t::zeroed().to_bytes(), [0; 64]);
    }

    #[test]
    fn handle_debug_is_hex() {
        let mut bytes = [0u8; HIP_IPC_HANDLE_SIZE];
        bytes[0] = 0xab;
        bytes[63] = 0x01;
        let text = format!("{:?}", hipIpcEventHandle_t::from_bytes(bytes));
        assert!(text.starts_with("hipIpcEventHandle_t(ab00"), "{text}");
        assert!(text.ends_with("0001)"), "{text}");
        assert_eq!(text.len(), "hipIpcEventHandle_t()".len() + 128);
    }
}
