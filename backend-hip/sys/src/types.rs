//! C types of the HIP runtime API that devipc passes across the FFI boundary.
//!
//! These mirror `hip/hip_runtime_api.h` and `hip/driver_types.h` (HIP 5.2 as packaged by
//! Debian, identical in ROCm 6.x and 7.x for everything here except
//! `hipMemAllocationProp`, whose two layouts are both here; api-facts B.2, B.3, B.4). They are
//! plain data: the [`HipApi`](crate::HipApi) function table takes and returns them, the
//! backend stores them, and the 64-byte IPC handles travel inside devipc tokens.
//!
//! The names are the C names on purpose, so the [`for_each_hip_fn!`](crate::for_each_hip_fn)
//! list reads like the C prototypes. `use devipc_hip_sys::types::*;` brings every name the
//! list uses into scope, including the `c_*` integer aliases.

use core::fmt;
use core::marker::{PhantomData, PhantomPinned};

pub use core::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

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

// ---------------------------------------------------------------------------------------
// Virtual memory management (VMM): api-facts B.4
// ---------------------------------------------------------------------------------------

/// Opaque runtime allocation object; only ever used behind
/// [`hipMemGenericAllocationHandle_t`].
#[repr(C)]
pub struct ihipMemGenericAllocationHandle {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// A physical allocation of the VMM API, `typedef struct ihipMemGenericAllocationHandle*
/// hipMemGenericAllocationHandle_t`: made by `hipMemCreate` or
/// `hipMemImportFromShareableHandle`, mapped with `hipMemMap`, dropped with
/// `hipMemRelease`.
pub type hipMemGenericAllocationHandle_t = *mut ihipMemGenericAllocationHandle;

/// `enum hipMemLocationType` (4 bytes): `hipMemLocationType*` in
/// [`consts`](crate::consts). A `c_int` because newer runtimes added values (HIP 7:
/// `Host`, `HostNuma`, `HostNumaCurrent`).
pub type hipMemLocationType = c_int;

/// `enum hipMemcpySrcAccessOrder` (4 bytes), the `srcAccessOrder` of a
/// [`hipMemcpyAttributes`] (HIP 7.1 `hip/driver_types.h`: `Invalid` 0, `Stream` 1,
/// `DuringApiCall` 2, `Any` 3), as `cudaMemcpySrcAccessOrder`.
pub type hipMemcpySrcAccessOrder = c_int;

/// `hipMemcpyAttributes` (HIP 7.1, `hip/driver_types.h`; 24 bytes): the attributes of a
/// range of descriptors of `hipMemcpyBatchAsync`, laid out as CUDA's
/// `cudaMemcpyAttributes`. CLR up to at least ROCm 7.2 does not support them
/// (`hipMemcpyBatchAsync` with `numAttrs > 0` is `hipErrorNotSupported`,
/// `hipamd/src/hip_memory.cpp`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[allow(non_snake_case)] // the C field names
pub struct hipMemcpyAttributes {
    /// A [`hipMemcpySrcAccessOrder`].
    pub srcAccessOrder: hipMemcpySrcAccessOrder,
    /// Where the sources are expected to live (a hint).
    pub srcLocHint: hipMemLocation,
    /// Where the destinations are expected to live (a hint).
    pub dstLocHint: hipMemLocation,
    /// `hipMemcpyFlag*` bits (`hipMemcpyFlagPreferOverlapWithCompute` = 1).
    pub flags: c_uint,
}

/// `enum hipMemAccessFlags` (4 bytes): `hipMemAccessFlagsProt*` in [`consts`](crate::consts).
pub type hipMemAccessFlags = c_int;

/// `enum hipMemAllocationType` (4 bytes): `hipMemAllocationType*` in
/// [`consts`](crate::consts).
pub type hipMemAllocationType = c_int;

/// `enum hipMemAllocationHandleType` (4 bytes): `hipMemHandleType*` in
/// [`consts`](crate::consts) (POSIX fd 0x1; the fabric type 0x8 only in HIP 7).
pub type hipMemAllocationHandleType = c_int;

/// `enum hipMemAllocationGranularity_flags` (4 bytes):
/// `hipMemAllocationGranularity*` in [`consts`](crate::consts).
pub type hipMemAllocationGranularity_flags = c_int;

/// `enum hipPointer_attribute` (4 bytes), the attribute `hipPointerGetAttribute` answers:
/// `HIP_POINTER_ATTRIBUTE_*` in [`consts`](crate::consts).
pub type hipPointer_attribute = c_int;

/// `enum hipDeviceAttribute_t` (4 bytes), the attribute `hipDeviceGetAttribute` answers:
/// `hipDeviceAttribute*` in [`consts`](crate::consts). A `c_int` because releases add
/// values.
pub type hipDeviceAttribute_t = c_int;

/// `hipMemLocation`: where memory lives (8 bytes, the same in every ROCm release).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct hipMemLocation {
    /// `type`: a [`hipMemLocationType`] (`hipMemLocationTypeDevice` = 1).
    pub r#type: hipMemLocationType,
    /// `id`: the device ordinal for a device location.
    pub id: c_int,
}

/// `hipUUID` (`typedef struct hipUUID_t { char bytes[16]; } hipUUID;`), what
/// `hipDeviceGetUuid` writes: 16 bytes that identify a physical device in every process,
/// whatever its visibility mask. On AMD the bytes are ASCII: CLR copies the 16 hex digits
/// that follow `GPU-` in the HSA agent's UUID string (`rocdevice.cpp`), so they are also
/// what `ROCR_VISIBLE_DEVICES=GPU-<digits>` selects the device by.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct hipUUID {
    /// `bytes`.
    pub bytes: [c_char; 16],
}

/// `hipMemAccessDesc`: one location's access to a mapped range, for `hipMemSetAccess`
/// (12 bytes, the same in every ROCm release).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct hipMemAccessDesc {
    /// The location (device) the access is for.
    pub location: hipMemLocation,
    /// A [`hipMemAccessFlags`] value.
    pub flags: hipMemAccessFlags,
}

/// The `allocFlags` member of [`hipMemAllocationProp`] (ROCm 5.3 and later), 4 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[allow(non_snake_case)] // the C field names
pub struct hipMemAllocationPropFlags {
    /// `compressionType`.
    pub compressionType: u8,
    /// `gpuDirectRDMACapable`.
    pub gpuDirectRDMACapable: u8,
    /// `usage`.
    pub usage: u16,
}

/// `hipMemAllocationProp` as laid out by **ROCm 5.3 and every later release** (6.x, 7.x;
/// upstream commit `d267eb7d6`, api-facts B.4). This is the type the
/// [`HipApi`](crate::HipApi) table's prototypes use (`hipMemCreate`,
/// `hipMemGetAllocationGranularity`, `hipMemGetAllocationPropertiesFromHandle`).
///
/// 32 bytes on x86_64: `type` @0, `requestedHandleType` @4, `location` @8,
/// `win32HandleMetaData` @16, `allocFlags` @24. HIP 7.0 turned `requestedHandleType` into
/// an anonymous union with `requestedHandleTypes` (the same 4-byte enum at the same
/// offset; Mooncake PR #1189), so the layout did not change again.
///
/// **Version rule:** a ROCm **5.2** runtime (Debian 12's `libamdhip64.so.5`) reads and
/// writes the older layout [`hipMemAllocationProp_R0502`] through the same pointer (the
/// size is the same, the offsets are not). Callers of a runtime whose
/// `hipRuntimeGetVersion` is below 5.3 (`HIP_VERSION` < 50300000, see
/// [`mem_allocation_prop_is_r0502`](crate::consts::mem_allocation_prop_is_r0502)) must
/// pass a `hipMemAllocationProp_R0502` cast to `*const hipMemAllocationProp`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_snake_case)] // the C field names
pub struct hipMemAllocationProp {
    /// `type`: a [`hipMemAllocationType`]; must be `hipMemAllocationTypePinned`.
    pub r#type: hipMemAllocationType,
    /// `requestedHandleType` (HIP 7: union with `requestedHandleTypes`): the shareable
    /// handle type the allocation may be exported as.
    pub requestedHandleType: hipMemAllocationHandleType,
    /// `location`: the device the memory is on.
    pub location: hipMemLocation,
    /// `win32HandleMetaData`: Windows only, NULL on Linux.
    pub win32HandleMetaData: *mut c_void,
    /// `allocFlags`.
    pub allocFlags: hipMemAllocationPropFlags,
}

impl hipMemAllocationProp {
    /// All zero (NULL pointer), for use as an out-parameter or a base to fill in.
    pub const fn zeroed() -> Self {
        hipMemAllocationProp {
            r#type: 0,
            requestedHandleType: 0,
            location: hipMemLocation { r#type: 0, id: 0 },
            win32HandleMetaData: core::ptr::null_mut(),
            allocFlags: hipMemAllocationPropFlags {
                compressionType: 0,
                gpuDirectRDMACapable: 0,
                usage: 0,
            },
        }
    }
}

impl Default for hipMemAllocationProp {
    fn default() -> Self {
        Self::zeroed()
    }
}

/// `hipMemAllocationProp` as laid out by **ROCm 5.2.x** (Debian 12's `libamdhip64-dev
/// 5.2.3` header, upstream rocm-5.2.3; api-facts B.4): the same 32 bytes as
/// [`hipMemAllocationProp`] but in another order. Offsets on x86_64 (checked against the
/// installed header by `tests/hip_sys/headers.rs`): `compressionType` @0, `location` @4,
/// `requestedHandleType` @12, `type` @16, `usage` @20, `win32HandleMetaData` @24.
///
/// Not used by the table's prototypes; pass it cast to `*const hipMemAllocationProp` to a
/// runtime older than 5.3 (see the version rule on [`hipMemAllocationProp`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_snake_case)] // the C field names
pub struct hipMemAllocationProp_R0502 {
    /// `compressionType`.
    pub compressionType: u8,
    /// `location`.
    pub location: hipMemLocation,
    /// `requestedHandleType`.
    pub requestedHandleType: hipMemAllocationHandleType,
    /// `type`.
    pub r#type: hipMemAllocationType,
    /// `usage`.
    pub usage: u16,
    /// `win32HandleMetaData`.
    pub win32HandleMetaData: *mut c_void,
}

impl hipMemAllocationProp_R0502 {
    /// All zero (NULL pointer).
    pub const fn zeroed() -> Self {
        hipMemAllocationProp_R0502 {
            compressionType: 0,
            location: hipMemLocation { r#type: 0, id: 0 },
            requestedHandleType: 0,
            r#type: 0,
            usage: 0,
            win32HandleMetaData: core::ptr::null_mut(),
        }
    }

    /// The same properties in the ROCm 5.3+ layout.
    pub const fn to_current(&self) -> hipMemAllocationProp {
        hipMemAllocationProp {
            r#type: self.r#type,
            requestedHandleType: self.requestedHandleType,
            location: self.location,
            win32HandleMetaData: self.win32HandleMetaData,
            allocFlags: hipMemAllocationPropFlags {
                compressionType: self.compressionType,
                gpuDirectRDMACapable: 0,
                usage: self.usage,
            },
        }
    }

    /// The same properties in the ROCm 5.2 layout (`gpuDirectRDMACapable` has no field
    /// there and is dropped).
    pub const fn from_current(p: &hipMemAllocationProp) -> Self {
        hipMemAllocationProp_R0502 {
            compressionType: p.allocFlags.compressionType,
            location: p.location,
            requestedHandleType: p.requestedHandleType,
            r#type: p.r#type,
            usage: p.allocFlags.usage,
            win32HandleMetaData: p.win32HandleMetaData,
        }
    }
}

impl Default for hipMemAllocationProp_R0502 {
    fn default() -> Self {
        Self::zeroed()
    }
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
    assert!(size_of::<hipMemGenericAllocationHandle_t>() == size_of::<*mut c_void>());
    assert!(size_of::<hipUUID>() == 16);
    assert!(align_of::<hipUUID>() == 1);
    assert!(size_of::<hipMemLocation>() == 8);
    assert!(size_of::<hipMemAccessDesc>() == 12);
    assert!(size_of::<hipMemcpyAttributes>() == 24);
    assert!(core::mem::offset_of!(hipMemcpyAttributes, srcLocHint) == 4);
    assert!(core::mem::offset_of!(hipMemcpyAttributes, dstLocHint) == 12);
    assert!(core::mem::offset_of!(hipMemcpyAttributes, flags) == 20);
    assert!(size_of::<hipMemAllocationProp>() == 32);
    assert!(core::mem::offset_of!(hipMemAllocationProp, requestedHandleType) == 4);
    assert!(core::mem::offset_of!(hipMemAllocationProp, location) == 8);
    assert!(core::mem::offset_of!(hipMemAllocationProp, win32HandleMetaData) == 16);
    assert!(core::mem::offset_of!(hipMemAllocationProp, allocFlags) == 24);
    assert!(size_of::<hipMemAllocationProp_R0502>() == 32);
    assert!(core::mem::offset_of!(hipMemAllocationProp_R0502, location) == 4);
    assert!(core::mem::offset_of!(hipMemAllocationProp_R0502, requestedHandleType) == 12);
    assert!(core::mem::offset_of!(hipMemAllocationProp_R0502, r#type) == 16);
    assert!(core::mem::offset_of!(hipMemAllocationProp_R0502, usage) == 20);
    assert!(core::mem::offset_of!(hipMemAllocationProp_R0502, win32HandleMetaData) == 24);
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
