//! The C types of the ACL runtime API that devipc uses, under the vendor's names.
//!
//! Everything here mirrors `acl/acl_base_rt.h` and `acl/acl_rt.h` of the CANN runtime
//! (api-facts A.1, A.4–A.8): opaque handles are `*mut c_void` aliases, C enums are
//! `c_int` aliases with one constant per enumerator (a Rust `enum` would be undefined
//! behaviour the day a newer runtime returns a value this crate does not know), and the
//! three VMM structs are `#[repr(C)]` with their sizes and offsets asserted at compile
//! time (LP64) and, against the real headers, by `tests/ascend_sys/abi_headers.rs` (the tool: `cargo xtask acl-headers check`).
//! The [`AclApi`](crate::AclApi) table and the emulator are written in these types.
#![allow(
    non_camel_case_types,
    non_snake_case,
    reason = "the ACL C API's own names (aclrtStream, ACL_MEMCPY_HOST_TO_DEVICE, handleType, ...) are kept so code and vendor documentation can be read side by side"
)]

use std::mem::{align_of, offset_of, size_of};

use crate::abi::{ConstDecl, ConstKind, FieldDecl, StructDecl, TypeDecl, TypeKind};

pub use core::ffi::{c_char, c_int, c_void};

/// Generates C typedef aliases and their [`TypeDecl`] records.
macro_rules! c_aliases {
    ($( $(#[$doc:meta])* $name:ident = $target:ty; )*) => {
        $( $(#[$doc])* pub type $name = $target; )*

        /// Records of the plain typedefs.
        const ALIAS_DECLS: &[TypeDecl] = &[$(
            TypeDecl {
                name: stringify!($name),
                rust_type: stringify!($target),
                size: size_of::<$name>(),
                align: align_of::<$name>(),
                kind: TypeKind::Alias,
            },
        )*];
    };
}

c_aliases! {
    /// `typedef int aclError;`: the status every ACL function returns; `0` is
    /// [`ACL_SUCCESS`](crate::codes::ACL_SUCCESS), the rest are listed in
    /// [`codes`](crate::codes).
    aclError = c_int;
    /// `typedef void *aclrtStream;`: a stream; null is the default stream.
    aclrtStream = *mut c_void;
    /// `typedef void *aclrtEvent;`: an event.
    aclrtEvent = *mut c_void;
    /// `typedef void *aclrtContext;`: a device context.
    aclrtContext = *mut c_void;
    /// `typedef void *aclrtNotify;`: a notify, the synchronisation object devipc shares
    /// between processes (api-facts A.8).
    aclrtNotify = *mut c_void;
    /// `typedef void *aclrtDrvMemHandle;`: a physical memory handle of the VMM API
    /// (`aclrtMallocPhysical`, `aclrtMemImportFromShareableHandle`).
    aclrtDrvMemHandle = *mut c_void;
}

/// Generates C enum typedefs (as `c_int` aliases), their enumerator constants, and the
/// [`TypeDecl`] / [`ConstDecl`] records of both.
macro_rules! c_enums {
    ($(
        $(#[$doc:meta])*
        enum $name:ident {
            $( $(#[$vdoc:meta])* $variant:ident = $value:expr, )*
        }
    )*) => {
        $(
            $(#[$doc])*
            pub type $name = c_int;
            $( $(#[$vdoc])* pub const $variant: $name = $value; )*
        )*

        /// Records of the enum typedefs.
        const ENUM_DECLS: &[TypeDecl] = &[$(
            TypeDecl {
                name: stringify!($name),
                rust_type: "c_int",
                size: size_of::<$name>(),
                align: align_of::<$name>(),
                kind: TypeKind::Enum,
            },
        )*];

        /// Records of every enumerator, for the ABI check.
        pub(crate) const ENUM_CONST_DECLS: &[ConstDecl] = &[$($(
            ConstDecl {
                name: stringify!($variant),
                value: $variant as i128,
                rust_type: stringify!($name),
                size: size_of::<$name>(),
                signed: true,
                kind: ConstKind::Enumerator { enum_type: stringify!($name) },
            },
        )*)*];
    };
}

c_enums! {
    /// `aclrtMemcpyKind`: direction of `aclrtMemcpy`. Values 4–7 are newer than the 2024
    /// torch_npu header.
    enum aclrtMemcpyKind {
        /// Host to host.
        ACL_MEMCPY_HOST_TO_HOST = 0,
        /// Host to device.
        ACL_MEMCPY_HOST_TO_DEVICE = 1,
        /// Device to host.
        ACL_MEMCPY_DEVICE_TO_HOST = 2,
        /// Device to device.
        ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
        /// Direction inferred from the addresses (not allowed on IPC-imported memory).
        ACL_MEMCPY_DEFAULT = 4,
        /// Host to device through a staging buffer.
        ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE = 5,
        /// Device to device within one device.
        ACL_MEMCPY_INNER_DEVICE_TO_DEVICE = 6,
        /// Device to device across devices.
        ACL_MEMCPY_INTER_DEVICE_TO_DEVICE = 7,
    }

    /// `aclrtMemMallocPolicy`: page policy of `aclrtMalloc`; the high values are flags
    /// that may be or-ed onto a policy.
    enum aclrtMemMallocPolicy {
        /// Huge pages first, normal pages if none are left.
        ACL_MEM_MALLOC_HUGE_FIRST = 0,
        /// Huge pages only.
        ACL_MEM_MALLOC_HUGE_ONLY = 1,
        /// Normal pages only.
        ACL_MEM_MALLOC_NORMAL_ONLY = 2,
        /// Huge pages first, usable peer-to-peer.
        ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3,
        /// Huge pages only, usable peer-to-peer.
        ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4,
        /// Normal pages only, usable peer-to-peer.
        ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5,
        /// 1 GiB pages only.
        ACL_MEM_MALLOC_HUGE1G_ONLY = 6,
        /// 1 GiB pages only, usable peer-to-peer.
        ACL_MEM_MALLOC_HUGE1G_ONLY_P2P = 7,
        /// Flag: low-bandwidth memory.
        ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100,
        /// Flag: high-bandwidth memory.
        ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000,
        /// Flag: read-only from user space.
        ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x10_0000,
    }

    /// `aclrtMemAttr`: memory kind, used by `aclrtGetMemInfo` and as
    /// `aclrtPhysicalMemProp::memAttr`. The `ACL_DDR_*` kinds are host-only.
    enum aclrtMemAttr {
        /// DDR memory.
        ACL_DDR_MEM = 0,
        /// HBM memory.
        ACL_HBM_MEM = 1,
        /// DDR, huge pages.
        ACL_DDR_MEM_HUGE = 2,
        /// DDR, normal pages.
        ACL_DDR_MEM_NORMAL = 3,
        /// HBM, huge pages.
        ACL_HBM_MEM_HUGE = 4,
        /// HBM, normal pages (served as huge pages by the VMM API).
        ACL_HBM_MEM_NORMAL = 5,
        /// DDR, huge pages, peer-to-peer.
        ACL_DDR_MEM_P2P_HUGE = 6,
        /// DDR, normal pages, peer-to-peer.
        ACL_DDR_MEM_P2P_NORMAL = 7,
        /// HBM, huge pages, peer-to-peer.
        ACL_HBM_MEM_P2P_HUGE = 8,
        /// HBM, normal pages, peer-to-peer.
        ACL_HBM_MEM_P2P_NORMAL = 9,
        /// HBM, 1 GiB pages.
        ACL_HBM_MEM_HUGE1G = 10,
        /// HBM, 1 GiB pages, peer-to-peer.
        ACL_HBM_MEM_P2P_HUGE1G = 11,
        /// Device memory, normal pages.
        ACL_MEM_NORMAL = 12,
        /// Device memory, 2 MiB pages.
        ACL_MEM_HUGE = 13,
        /// Device memory, 1 GiB pages (A2/A3 only).
        ACL_MEM_HUGE1G = 14,
        /// Device memory, normal pages, peer-to-peer.
        ACL_MEM_P2P_NORMAL = 15,
        /// Device memory, 2 MiB pages, peer-to-peer.
        ACL_MEM_P2P_HUGE = 16,
        /// Device memory, 1 GiB pages, peer-to-peer.
        ACL_MEM_P2P_HUGE1G = 17,
    }

    /// `aclrtMemLocationType`: where a VMM allocation lives
    /// (`aclrtMemLocation::type`).
    enum aclrtMemLocationType {
        /// Host (reserved by the vendor: not supported by current runtimes).
        ACL_MEM_LOCATION_TYPE_HOST = 0,
        /// A device; `aclrtMemLocation::id` is the device id.
        ACL_MEM_LOCATION_TYPE_DEVICE = 1,
        /// Unregistered memory.
        ACL_MEM_LOCATION_TYPE_UNREGISTERED = 2,
        /// Managed memory (newer runtimes only).
        ACL_MEM_LOCATION_TYPE_MANAGED = 3,
        /// Host memory of a NUMA node (newer runtimes only).
        ACL_MEM_LOCATION_TYPE_HOST_NUMA = 4,
    }

    /// `aclrtMemAllocationType`: kind of physical allocation.
    enum aclrtMemAllocationType {
        /// Pinned memory, the only kind.
        ACL_MEM_ALLOCATION_TYPE_PINNED = 0,
    }

    /// `aclrtMemHandleType`: handle type of `aclrtMallocPhysical` and of the V1
    /// `aclrtMemExportToShareableHandle`, which requires `NONE`.
    enum aclrtMemHandleType {
        /// No OS handle: the default, and the value V1 export requires.
        ACL_MEM_HANDLE_TYPE_NONE = 0,
        /// POSIX file descriptor (v9.1.0+ headers; absent at v8.5.0).
        ACL_MEM_HANDLE_TYPE_POSIX = 2,
    }

    /// `aclrtMemGranularityOptions`: which granularity
    /// `aclrtMemGetAllocationGranularity` reports.
    enum aclrtMemGranularityOptions {
        /// The minimum granularity: sizes passed to `aclrtMapMem` must be multiples of it.
        ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
        /// The recommended granularity.
        ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1,
        /// Sentinel.
        ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF = 0xFFFF,
    }

    /// `aclrtMemAccessFlags`: access granted by `aclrtMemSetAccess`
    /// (an anonymous enum typedef in the header).
    enum aclrtMemAccessFlags {
        /// No access.
        ACL_RT_MEM_ACCESS_FLAGS_NONE = 0x0,
        /// Read access.
        ACL_RT_MEM_ACCESS_FLAGS_READ = 0x1,
        /// Read and write access.
        ACL_RT_MEM_ACCESS_FLAGS_READWRITE = 0x3,
    }

    /// `aclrtEventRecordedStatus`: what `aclrtQueryEventStatus` reports.
    enum aclrtEventRecordedStatus {
        /// The record the event stands for has not completed.
        ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
        /// Completed (or never recorded).
        ACL_EVENT_RECORDED_STATUS_COMPLETE = 1,
    }
}

/// The all-zero value of a struct field type (what `Default` of the C structs builds;
/// derived `Default` stops at arrays of 32 elements).
trait Zeroed: Copy {
    const ZERO: Self;
}

impl Zeroed for i8 {
    const ZERO: Self = 0;
}
impl Zeroed for u8 {
    const ZERO: Self = 0;
}
impl Zeroed for i32 {
    const ZERO: Self = 0;
}
impl Zeroed for u32 {
    const ZERO: Self = 0;
}
impl Zeroed for u64 {
    const ZERO: Self = 0;
}
impl Zeroed for aclrtMemLocation {
    const ZERO: Self = aclrtMemLocation { id: 0, r#type: 0 };
}
impl<T: Zeroed, const N: usize> Zeroed for [T; N] {
    const ZERO: Self = [T::ZERO; N];
}

/// Generates `#[repr(C)]` structs and their [`TypeDecl`] / [`StructDecl`] records.
macro_rules! c_structs {
    ($(
        $(#[$doc:meta])*
        struct $name:ident {
            $( $(#[$fdoc:meta])* $field:ident : $fty:ty, )*
        }
    )*) => {
        $(
            $(#[$doc])*
            #[repr(C)]
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
            pub struct $name {
                $( $(#[$fdoc])* pub $field: $fty, )*
            }

            /// All zero, as `= {}` in C.
            impl Default for $name {
                fn default() -> Self {
                    $name { $( $field: Zeroed::ZERO, )* }
                }
            }
        )*

        /// Records of the structs as types.
        const STRUCT_TYPE_DECLS: &[TypeDecl] = &[$(
            TypeDecl {
                name: stringify!($name),
                rust_type: stringify!($name),
                size: size_of::<$name>(),
                align: align_of::<$name>(),
                kind: TypeKind::Struct,
            },
        )*];

        /// Field layout of every struct, for the ABI check.
        pub(crate) const STRUCT_DECLS: &[StructDecl] = &[$(
            StructDecl {
                name: stringify!($name),
                size: size_of::<$name>(),
                align: align_of::<$name>(),
                fields: &[$(
                    FieldDecl {
                        name: stringify!($field),
                        rust_type: stringify!($fty),
                        offset: offset_of!($name, $field),
                        size: size_of::<$fty>(),
                    },
                )*],
            },
        )*];
    };
}

c_structs! {
    /// `aclrtMemLocation`: a memory location (device or host) of the VMM API.
    /// 8 bytes: `id`@0, `type`@4.
    struct aclrtMemLocation {
        /// Device id (for [`ACL_MEM_LOCATION_TYPE_DEVICE`]).
        id: u32,
        /// The kind of location, an [`aclrtMemLocationType`] value.
        r#type: aclrtMemLocationType,
    }

    /// `aclrtPhysicalMemProp`: properties of a physical allocation
    /// (`aclrtMallocPhysical`, `aclrtMemGetAllocationGranularity`).
    /// 32 bytes on LP64: `handleType`@0 `allocationType`@4 `memAttr`@8 `location`@12
    /// `reserve`@24 (4 bytes of padding at 20).
    struct aclrtPhysicalMemProp {
        /// Must be [`ACL_MEM_HANDLE_TYPE_NONE`] for memory exported with the V1
        /// shareable-handle API.
        handleType: aclrtMemHandleType,
        /// [`ACL_MEM_ALLOCATION_TYPE_PINNED`].
        allocationType: aclrtMemAllocationType,
        /// Page kind, e.g. [`ACL_HBM_MEM_HUGE`].
        memAttr: aclrtMemAttr,
        /// Where to allocate.
        location: aclrtMemLocation,
        /// Reserved, 0.
        reserve: u64,
    }

    /// `aclrtMemAccessDesc`: one access grant of `aclrtMemSetAccess` (an anonymous struct
    /// typedef in the header). 24 bytes: `flags`@0 `location`@4 `rsv`@12.
    struct aclrtMemAccessDesc {
        /// The access granted, an [`aclrtMemAccessFlags`] value.
        flags: aclrtMemAccessFlags,
        /// Who is granted access.
        location: aclrtMemLocation,
        /// Reserved, zero.
        rsv: [u8; 12],
    }

    /// `aclrtUuid`: the 16-byte UUID of a device (`aclrtDeviceGetUuid`, CANN 8.x), the
    /// same for one physical device in every process whatever its visibility mask.
    struct aclrtUuid {
        /// The UUID's bytes.
        bytes: [c_char; 16],
    }

    /// `aclrtMemcpyBatchAttr`: the locations of a range of descriptors of
    /// `aclrtMemcpyBatchAsync` (RT-DOC `aclrtMemcpyBatchAttr.md`). 32 bytes: `dstLoc`@0
    /// `srcLoc`@8 `rsv`@16. The runtime compares each location with where the descriptor's
    /// memory really is (type, and the device id for a device); `rsv` must be zero.
    struct aclrtMemcpyBatchAttr {
        /// Where the destinations are.
        dstLoc: aclrtMemLocation,
        /// Where the sources are.
        srcLoc: aclrtMemLocation,
        /// Reserved, zero.
        rsv: [u8; 16],
    }

    /// `aclrtIpcEventHandle`: the 64-byte handle of an IPC event
    /// (`aclrtIpcGetEventHandle`), passed by value to `aclrtIpcOpenEventHandle`. Opaque.
    struct aclrtIpcEventHandle {
        /// The handle's bytes (`ACL_IPC_EVENT_HANDLE_SIZE`).
        reserved: [c_char; 64],
    }
}

/// Every named C type of this module: plain typedefs, enums, then structs.
pub(crate) fn type_decls() -> impl Iterator<Item = &'static TypeDecl> {
    ALIAS_DECLS
        .iter()
        .chain(ENUM_DECLS)
        .chain(STRUCT_TYPE_DECLS)
}

// Layouts the headers give on LP64 (x86_64, aarch64: the only Ascend hosts), compiled
// from the vendor header in api-facts A.5; `tests/ascend_sys/abi_headers.rs` (the tool: `cargo xtask acl-headers check`) re-checks them against
// the header itself.
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(size_of::<aclError>() == 4);
    assert!(size_of::<aclrtDrvMemHandle>() == 8);

    assert!(size_of::<aclrtMemLocation>() == 8);
    assert!(align_of::<aclrtMemLocation>() == 4);
    assert!(offset_of!(aclrtMemLocation, id) == 0);
    assert!(offset_of!(aclrtMemLocation, r#type) == 4);

    assert!(size_of::<aclrtPhysicalMemProp>() == 32);
    assert!(align_of::<aclrtPhysicalMemProp>() == 8);
    assert!(offset_of!(aclrtPhysicalMemProp, handleType) == 0);
    assert!(offset_of!(aclrtPhysicalMemProp, allocationType) == 4);
    assert!(offset_of!(aclrtPhysicalMemProp, memAttr) == 8);
    assert!(offset_of!(aclrtPhysicalMemProp, location) == 12);
    assert!(offset_of!(aclrtPhysicalMemProp, reserve) == 24);

    assert!(size_of::<aclrtMemAccessDesc>() == 24);
    assert!(align_of::<aclrtMemAccessDesc>() == 4);
    assert!(offset_of!(aclrtMemAccessDesc, flags) == 0);
    assert!(offset_of!(aclrtMemAccessDesc, location) == 4);
    assert!(offset_of!(aclrtMemAccessDesc, rsv) == 12);

    assert!(size_of::<aclrtMemcpyBatchAttr>() == 32);
    assert!(align_of::<aclrtMemcpyBatchAttr>() == 4);
    assert!(offset_of!(aclrtMemcpyBatchAttr, dstLoc) == 0);
    assert!(offset_of!(aclrtMemcpyBatchAttr, srcLoc) == 8);
    assert!(offset_of!(aclrtMemcpyBatchAttr, rsv) == 16);

    assert!(size_of::<aclrtUuid>() == 16);
    assert!(align_of::<aclrtUuid>() == 1);

    assert!(size_of::<aclrtIpcEventHandle>() == 64);
    assert!(align_of::<aclrtIpcEventHandle>() == 1);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_records_cover_every_kind() {
        let names: Vec<_> = type_decls().map(|t| t.name).collect();
        for n in [
            "aclError",
            "aclrtStream",
            "aclrtNotify",
            "aclrtDrvMemHandle",
            "aclrtMemcpyKind",
            "aclrtMemAccessFlags",
            "aclrtPhysicalMemProp",
            "aclrtMemAccessDesc",
        ] {
            assert!(names.contains(&n), "{n} missing from type_decls()");
        }
        assert_eq!(
            type_decls().count(),
            ALIAS_DECLS.len() + ENUM_DECLS.len() + STRUCT_TYPE_DECLS.len()
        );
    }

    #[test]
    fn struct_records_match_the_rust_layout() {
        let prop = STRUCT_DECLS
            .iter()
            .find(|s| s.name == "aclrtPhysicalMemProp")
            .unwrap();
        assert_eq!(prop.size, size_of::<aclrtPhysicalMemProp>());
        let offsets: Vec<_> = prop.fields.iter().map(|f| (f.name, f.offset)).collect();
        assert_eq!(
            offsets,
            [
                ("handleType", 0),
                ("allocationType", 4),
                ("memAttr", 8),
                ("location", 12),
                ("reserve", 24)
            ]
        );
        let loc = STRUCT_DECLS
            .iter()
            .find(|s| s.name == "aclrtMemLocation")
            .unwrap();
        assert_eq!(loc.fields[1].name, "r#type");
        assert_eq!(loc.fields[1].c_name(), "type");
    }

    #[test]
    fn defaults_are_all_zero() {
        let prop = aclrtPhysicalMemProp::default();
        assert_eq!(prop.handleType, ACL_MEM_HANDLE_TYPE_NONE);
        assert_eq!(prop.allocationType, ACL_MEM_ALLOCATION_TYPE_PINNED);
        assert_eq!(prop.location.r#type, ACL_MEM_LOCATION_TYPE_HOST);
        assert_eq!(aclrtMemAccessDesc::default().rsv, [0; 12]);
    }
}
