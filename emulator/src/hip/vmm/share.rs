//! Sharing VMM allocations between processes: `hipMemExportToShareableHandle` (a POSIX
//! fd naming the allocation's segment), `hipMemImportFromShareableHandle`,
//! `hipMemRetainAllocationHandle` and `hipMemGetAllocationPropertiesFromHandle`. The
//! allocation, reservation and mapping calls they work on are in the parent module.

use super::*;

/// `hipMemExportToShareableHandle(handle, handleType, flags)`: the new fd.
pub(crate) fn export(
    handle: usize,
    handle_type: hipMemAllocationHandleType,
    flags: u64,
) -> HipResult<OwnedFd> {
    if flags != 0 || handle == 0 {
        return Err(bad_arg(format!(
            "handle {handle:#x} must be non-NULL and flags {flags:#x} 0"
        )));
    }
    let p = physical(handle)?;
    if p.handle_type != handle_type {
        refuse(
            hipErrorInvalidValue,
            rules::VMM_EXPORT_HANDLE_TYPE_MATCHES,
            format!(
                "handleType {handle_type:#x} differs from the allocation's requestedHandleType {:#x}",
                p.handle_type
            ),
        )?;
    }
    let version = config()?.hip_version;
    if !versions::vmm_ipc(version) {
        refuse(
            hipErrorNotSupported,
            rules::VMM_IPC_NEEDS_ROCM_6_2,
            format!(
                "HIP {version} validates the export and then returns hipErrorNotSupported (VMM IPC first shipped in ROCm 6.2)"
            ),
        )?;
    }
    if handle_type != hipMemHandleTypePosixFileDescriptor {
        return Err(Failure::new(
            hipErrorInvalidValue,
            format!("handleType {handle_type:#x}: only POSIX file descriptors can be exported"),
        ));
    }
    let fd = p.file.try_clone().map_err(|e| EmuError::sys("dup", e))?;
    Ok(fd.into())
}

/// Where the `osHandle` of an import points, as the ffi read it.
#[derive(Debug)]
pub(crate) enum OsHandle<'a> {
    /// A file descriptor of this process.
    Fd(BorrowedFd<'a>),
    /// Not a usable fd under the emulated version's convention (why).
    Unusable(String),
}

/// `hipMemImportFromShareableHandle(osHandle, shHandleType)`: the new handle.
pub(crate) fn import(
    os_handle: OsHandle<'_>,
    handle_type: hipMemAllocationHandleType,
) -> HipResult<usize> {
    let version = config()?.hip_version;
    if !versions::vmm_ipc(version) {
        refuse(
            hipErrorNotSupported,
            rules::VMM_IPC_NEEDS_ROCM_6_2,
            format!("HIP {version} has no VMM IPC (first shipped in ROCm 6.2)"),
        )?;
    }
    let fd = match os_handle {
        OsHandle::Fd(fd) => fd,
        OsHandle::Unusable(why) => {
            return Err(Failure::rule(
                hipErrorInvalidValue,
                rules::VMM_IMPORT_OS_HANDLE_CONVENTION,
                why,
            ));
        }
    };
    if handle_type != hipMemHandleTypePosixFileDescriptor {
        return Err(Failure::new(
            hipErrorInvalidValue,
            format!("shHandleType {handle_type:#x}: only POSIX file descriptors can be imported"),
        ));
    }
    let unknown = |why: String| {
        Failure::rule(
            hipErrorInvalidValue,
            rules::VMM_IMPORT_EXPORTED_FD,
            format!("fd {}: {why}", fd.as_raw_fd()),
        )
    };
    let owned = fd
        .try_clone_to_owned()
        .map_err(|e| unknown(format!("not an open file descriptor ({e})")))?;
    let file = File::from(owned);
    let link = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_err(|e| unknown(format!("cannot resolve ({e})")))?;
    let text = link.to_string_lossy();
    if text.ends_with(" (deleted)") {
        return Err(unknown(format!(
            "{text}: every handle and mapping of the allocation was released before the import (the emulator cannot revive it)"
        )));
    }
    let state = state()?;
    let name = link.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let in_dir = link
        .parent()
        .is_some_and(|p| std::fs::canonicalize(state.dir().path()).is_ok_and(|dir| dir == p));
    let id = match parse_object_file(name) {
        Some((id, ObjectFile::Segment)) if in_dir => id,
        _ => return Err(unknown(format!("{text} is not an exported VMM allocation"))),
    };
    let same_inode = std::fs::metadata(&link)
        .ok()
        .zip(file.metadata().ok())
        .is_some_and(|(a, b)| a.ino() == b.ino() && a.dev() == b.dev());
    if !same_inode {
        return Err(unknown(format!("{text} was replaced")));
    }
    let me = me()?;
    let (device, size) = state
        .registry()
        .update(id, |m| {
            m.expect(Vendor::Hip, ObjectKind::Memory)?;
            if m.aux & MARK_MASK != VMM_MARK {
                return Err(unknown(format!("{text} is not memory of hipMemCreate")));
            }
            m.add_holder(me)?;
            Ok::<_, Failure>((m.info().device, m.info().size as usize))
        })
        .map_err(|f| {
            if f.rule.is_some() {
                f
            } else {
                unknown(f.message)
            }
        })?;
    let handle = PHYSICAL.insert(Physical {
        id,
        device,
        size,
        // CLR records the import's shHandleType as requestedHandleTypes.
        handle_type,
        file: Arc::new(file),
        refs: 1,
    });
    match handle {
        Ok(h) => Ok(h),
        Err(e) => {
            let _ = state.registry().release(id, me);
            Err(e.into())
        }
    }
}

/// `hipMemRetainAllocationHandle` calls of this process on `hipMalloc` memory.
pub(crate) static RETAINS_OF_MALLOC_MEMORY: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// `hipMemRetainAllocationHandle(addr)`: the handle mapped at `addr`, WITHOUT a new
/// reference. CLR (`hip_vm.cpp`) returns the mapping's handle and takes none (unlike
/// CUDA's `cuMemRetainAllocationHandle`), and `hipMemRelease` drops a reference: a
/// caller that releases what it retained drops the creator's reference, and the
/// creator's own release later finds the handle gone (`hip.vmm.handle-valid`), so the
/// mistake is observable here as it would corrupt a real process.
pub(crate) fn retain(addr: usize) -> HipResult<usize> {
    if addr == 0 {
        return Err(bad_arg("addr is NULL"));
    }
    let handle = {
        let vmm = vmm();
        mapping_at(&vmm, addr).map(|(_, m)| m.handle)
    };
    let Some(handle) = handle else {
        if super::super::memory::RANGES
            .resolve(addr)
            .is_some_and(|hit| hit.value.role == super::super::memory::Role::Allocation)
        {
            // Answered with the documented error here; some ROCm 7.x releases are reported
            // to crash on it (see `retains_of_malloc_memory`).
            RETAINS_OF_MALLOC_MEMORY.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        return Err(Failure::rule(
            hipErrorInvalidValue,
            rules::VMM_RETAIN_NEEDS_VMM_MEMORY,
            format!(
                "{addr:#x} is not inside a hipMemMap mapping (hipMalloc memory has no allocation handle)"
            ),
        ));
    };
    PHYSICAL
        .with(handle, |_| ())
        .map_err(|_| handle_gone(handle))?;
    Ok(handle)
}

/// `hipMemGetAllocationPropertiesFromHandle(handle)`. `location.id` is this process's
/// ordinal of the allocation's physical device; for an imported allocation on a device
/// this process's masks hide, `hipInvalidDeviceId` (issue 16: the emulator's choice, the
/// vendor does not say; no ordinal would name that device here).
pub(crate) fn properties(handle: usize) -> HipResult<Prop> {
    let p = physical(handle)?;
    Ok(Prop {
        alloc_type: hipMemAllocationTypePinned,
        handle_type: p.handle_type,
        location_type: hipMemLocationTypeDevice,
        location_id: ordinal_or_invalid(p.device)?,
    })
}
