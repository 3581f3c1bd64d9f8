//! The HIP VMM subset (issue 15) across real processes: A creates, maps and exports a
//! physical allocation as a POSIX fd; the fd reaches B with `pidfd_getfd` (B duplicates
//! it out of A, as a process given the fd over `SCM_RIGHTS` would hold it); B imports it
//! with the emulated version's `osHandle` convention (a pointer to the fd before ROCm 7.1,
//! the fd value from 7.1), maps it, sets access and shares bytes with A. Every rule
//! violation returns the vendor's code and names its rule; a killed exporter leaves B's
//! mapping intact; once everyone is gone the state directory is empty.
//!
//! The shell commands (`v*`) are executed by [`execute`], reached from the HIP shell of
//! `hip_support`.

use std::ffi::{c_int, c_void};

use crate::hip_support::*;
use devipc_emulator::hip::rules::{self, *};
use devipc_emulator::state::violations;
use devipc_hip_sys::*;

/// Entry point of the child processes (a no-op in the parent run).
#[test]
fn child_role() {
    child_main();
}

/// The VMM rules, for `hip_break_rules::every_rule_has_a_break_scenario`: each has a
/// scenario below (a violation, and where the rule can be switched off, a broken run).
pub const COVERED: &[&str] = &[
    VMM_ARGS_VALID,
    VMM_HANDLE_VALID,
    VMM_PROP_PINNED_DEVICE,
    VMM_HANDLE_TYPE_SUPPORTED,
    VMM_GRANULARITY_ALIGNED,
    VMM_IPC_NEEDS_ROCM_6_2,
    VMM_EXPORT_HANDLE_TYPE_MATCHES,
    VMM_IMPORT_OS_HANDLE_CONVENTION,
    VMM_IMPORT_EXPORTED_FD,
    VMM_MAP_INTO_RESERVATION,
    VMM_WHOLE_MAPPINGS,
    VMM_ACCESS_REQUIRED,
    VMM_UNMAP_BEFORE_ADDRESS_FREE,
    VMM_RETAIN_NEEDS_VMM_MEMORY,
    VMM_LEGACY_IPC_REFUSED,
    VMM_ADDRESS_RANGE_IS_MAPPING,
    VMM_HOST_ACCESS_ACCEPTED,
];

const G: u64 = 2 << 20;
const POSIX: i32 = hipMemHandleTypePosixFileDescriptor;
const RW: i32 = hipMemAccessFlagsProtReadWrite;

// ---------------------------------------------------------------------------------------
// Child side: the `v*` shell commands.

/// Whether `cmd` is one of this module's shell commands.
pub fn is_command(cmd: &str) -> bool {
    cmd.starts_with('v') && cmd != "version"
}

fn num(words: &[&str], i: usize) -> u64 {
    words.get(i).and_then(|w| parse_num(w)).unwrap_or(0)
}

fn runtime_version(api: &HipApi) -> i32 {
    let mut v = 0;
    // SAFETY: a valid out pointer.
    unsafe { (api.hipRuntimeGetVersion)(&mut v) };
    v
}

/// Runs one `v*` command with the emulator's table; returns `<code> <values...>`.
pub fn execute(words: &[&str]) -> String {
    let api = devipc_emulator::hip_api();
    let n = |i| num(words, i);
    let p = |i| n(i) as usize as *mut c_void;
    macro_rules! call {
        ($name:ident($($a:expr),* $(,)?)) => {{
            let f = api.$name.expect(concat!(stringify!($name), " in the table"));
            // SAFETY: the shell passes pointers to live locals or values the emulator
            // handed out (or deliberately bad ones, which the emulator must reject).
            unsafe { f($($a),*) }
        }};
    }
    match words[0] {
        // vcreate <size> <handleType> [allocType] [device] [flags]
        "vcreate" => {
            let mut prop = hipMemAllocationProp {
                r#type: words
                    .get(3)
                    .map_or(hipMemAllocationTypePinned, |_| n(3) as i32),
                requestedHandleType: n(2) as i32,
                location: hipMemLocation {
                    r#type: hipMemLocationTypeDevice,
                    id: n(4) as i32,
                },
                ..hipMemAllocationProp::zeroed()
            };
            let mut h: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
            let old;
            let prop_ptr = if mem_allocation_prop_is_r0502(runtime_version(&api)) {
                old = hipMemAllocationProp_R0502::from_current(&prop);
                (&old as *const hipMemAllocationProp_R0502).cast()
            } else {
                &mut prop as *const hipMemAllocationProp
            };
            let c = call!(hipMemCreate(&mut h, n(1) as usize, prop_ptr, n(5)));
            format!("{c} {:#x}", h as usize)
        }
        "vgran" => {
            let prop = hipMemAllocationProp {
                r#type: hipMemAllocationTypePinned,
                location: hipMemLocation {
                    r#type: hipMemLocationTypeDevice,
                    id: 0,
                },
                ..hipMemAllocationProp::zeroed()
            };
            let mut g = 0usize;
            let c = call!(hipMemGetAllocationGranularity(&mut g, &prop, n(1) as i32));
            format!("{c} {g}")
        }
        // vprop <h>: type handleType locationType locationId, in the version's layout
        "vprop" => {
            let mut buf = hipMemAllocationProp::zeroed();
            let c = call!(hipMemGetAllocationPropertiesFromHandle(
                &mut buf,
                n(1) as usize as _
            ));
            let prop = if mem_allocation_prop_is_r0502(runtime_version(&api)) {
                // SAFETY: both layouts are 32 plain bytes.
                unsafe {
                    std::mem::transmute::<hipMemAllocationProp, hipMemAllocationProp_R0502>(buf)
                }
                .to_current()
            } else {
                buf
            };
            format!(
                "{c} {} {} {} {}",
                prop.r#type, prop.requestedHandleType, prop.location.r#type, prop.location.id
            )
        }
        "vrelease" => format!("{}", call!(hipMemRelease(n(1) as usize as _))),
        // vreserve <size> [alignment] [flags]
        "vreserve" => {
            let mut va = std::ptr::null_mut();
            let c = call!(hipMemAddressReserve(
                &mut va,
                n(1) as usize,
                n(2) as usize,
                std::ptr::null_mut(),
                n(3),
            ));
            format!("{c} {:#x}", va as usize)
        }
        "vfree" => format!("{}", call!(hipMemAddressFree(p(1), n(2) as usize))),
        // vmap <va> <size> <h> [offset] [flags]
        "vmap" => format!(
            "{}",
            call!(hipMemMap(
                p(1),
                n(2) as usize,
                n(4) as usize,
                n(3) as usize as _,
                n(5)
            ))
        ),
        "vunmap" => format!("{}", call!(hipMemUnmap(p(1), n(2) as usize))),
        // vaccess <va> <size> <device> <flags> [locationType]
        "vaccess" => {
            let desc = hipMemAccessDesc {
                location: hipMemLocation {
                    r#type: words
                        .get(5)
                        .map_or(hipMemLocationTypeDevice, |_| n(5) as i32),
                    id: n(3) as i32,
                },
                flags: n(4) as i32,
            };
            format!("{}", call!(hipMemSetAccess(p(1), n(2) as usize, &desc, 1)))
        }
        "vgetaccess" => {
            let loc = hipMemLocation {
                r#type: hipMemLocationTypeDevice,
                id: n(2) as i32,
            };
            let mut flags = 0;
            let c = call!(hipMemGetAccess(&mut flags, &loc, p(1)));
            format!("{c} {flags}")
        }
        // vexport <h> <handleType> [flags]
        "vexport" => {
            let mut fd: c_int = -1;
            let c = call!(hipMemExportToShareableHandle(
                (&mut fd as *mut c_int).cast(),
                n(1) as usize as _,
                n(2) as i32,
                n(3),
            ));
            format!("{c} {fd}")
        }
        // vgetfd <pid> <fd>: a duplicate of another process's fd (pidfd_getfd).
        "vgetfd" => {
            // SAFETY: plain system calls on integers.
            let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, n(1) as i32, 0) };
            assert!(
                pidfd >= 0,
                "pidfd_open: {}",
                std::io::Error::last_os_error()
            );
            // SAFETY: as above.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd as i32, n(2) as i32, 0) };
            let err = std::io::Error::last_os_error();
            // SAFETY: our pidfd.
            unsafe { libc::close(pidfd as i32) };
            assert!(fd >= 0, "pidfd_getfd: {err}");
            format!("0 {fd}")
        }
        // vclose <fd>
        "vclose" => {
            // SAFETY: closes an fd this shell was given.
            format!("{}", unsafe { libc::close(n(1) as i32) })
        }
        // vimport <fd> <ptr|val> [handleType]
        "vimport" => {
            let mut fd = n(1) as c_int;
            let os: *mut c_void = if words.get(2) == Some(&"val") {
                fd as usize as *mut c_void
            } else {
                (&mut fd as *mut c_int).cast()
            };
            let ty = words.get(3).map_or(POSIX, |_| n(3) as i32);
            let mut h = std::ptr::null_mut();
            let c = call!(hipMemImportFromShareableHandle(&mut h, os, ty));
            format!("{c} {:#x}", h as usize)
        }
        "vretain" => {
            let mut h = std::ptr::null_mut();
            let c = call!(hipMemRetainAllocationHandle(&mut h, p(1)));
            format!("{c} {:#x}", h as usize)
        }
        // vattr <attribute> <ptr>
        "vattr" => {
            let mut v: u64 = 0;
            let c = call!(hipPointerGetAttribute(
                (&mut v as *mut u64).cast(),
                n(1) as i32,
                p(2)
            ));
            format!("{c} {v}")
        }
        "vhas" => format!("0 {}", api.hipMemCreate.is_some() as u8),
        other => panic!("unknown vmm command {other}"),
    }
}

// ---------------------------------------------------------------------------------------
// Parent side.

/// A process with one mapped allocation: (handle, reserved VA).
fn create_and_map(a: &mut Hip, size: u64, handle_type: i32) -> (String, String) {
    let h = a
        .ok(&format!("vcreate {size} {handle_type}"))
        .val(0)
        .to_owned();
    let va = a.ok(&format!("vreserve {size}")).val(0).to_owned();
    a.ok(&format!("vmap {va} {size} {h}"));
    (h, va)
}

/// Unmaps, releases and frees what [`create_and_map`] made.
fn teardown(a: &mut Hip, h: &str, va: &str, size: u64) {
    a.ok(&format!("vunmap {va} {size}"));
    a.ok(&format!("vrelease {h}"));
    a.ok(&format!("vfree {va} {size}"));
}

/// A exports, B imports through `pidfd_getfd` with the version's convention; returns
/// (B's handle, B's VA).
pub(crate) fn share(a: &mut Hip, b: &mut Hip, h: &str, version: &str) -> (String, String) {
    let fd = a.ok(&format!("vexport {h} {POSIX}")).num(0);
    let local = b.ok(&format!("vgetfd {} {fd}", a.pid())).num(0);
    // The exporter may close its fd at once: B holds a duplicate.
    a.ok(&format!("vclose {fd}"));
    let mode = if at_least(version, 7, 1) {
        "val"
    } else {
        "ptr"
    };
    let bh = b.ok(&format!("vimport {local} {mode}")).val(0).to_owned();
    // The fd is not needed after the import.
    b.ok(&format!("vclose {local}"));
    let bva = b.ok(&format!("vreserve {G}")).val(0).to_owned();
    b.ok(&format!("vmap {bva} {G} {bh}"));
    (bh, bva)
}

#[test]
fn an_fd_exported_by_one_process_maps_the_same_bytes_in_another() {
    if !pidfd_between_children("an_fd_exported_by_one_process_maps_the_same_bytes_in_another") {
        return;
    }
    for version in ["6.2", "7.0", "7.1"] {
        let root = TestRoot::new(&format!("hip-vmm-share-{version}"));
        let mut a = Hip::spawn("exporter", &root, version, &[]);
        let mut b = Hip::spawn("importer", &root, version, &[]);
        let (h, va) = create_and_map(&mut a, G, POSIX);
        a.ok(&format!("vaccess {va} {G} 0 {RW}"));
        assert_eq!(a.ok(&format!("vgetaccess {va} 0")).num(0), RW as u64);
        a.ok(&format!("fill {va} 65536 7"));
        let (bh, bva) = share(&mut a, &mut b, &h, version);
        assert_eq!(b.ok(&format!("vgetaccess {bva} 0")).num(0), 0);
        b.ok(&format!("vaccess {bva} {G} 0 {RW}"));
        assert_eq!(b.ok(&format!("check {bva} 65536 7")).val(0), "same");
        // B writes back at an offset; A sees it.
        let at = parse_num(&bva).unwrap() + 4096;
        b.ok(&format!("fill {} 8192 9", hexptr(at)));
        let a_at = parse_num(&va).unwrap() + 4096;
        assert_eq!(
            a.ok(&format!("check {} 8192 9", hexptr(a_at))).val(0),
            "same"
        );
        // hipMemset works on the mapping, and the range is the mapping.
        b.ok(&format!("memset {bva} 5 4096"));
        let last = hexptr(parse_num(&va).unwrap() + 4095);
        assert_eq!(a.ok(&format!("readbyte {last}")).num(0), 5);
        let range = b.ok(&format!("range {}", hexptr(at)));
        assert_eq!(range.num(0), parse_num(&bva).unwrap());
        assert_eq!(range.num(1), G);
        // The imported allocation's properties.
        let prop = b.ok(&format!("vprop {bh}"));
        assert_eq!(
            (prop.num(0), prop.num(1), prop.num(2), prop.num(3)),
            (1, POSIX as u64, 1, 0)
        );
        // Retain gives the mapping's handle and takes no reference (CLR): releasing it as
        // well would release the import twice.
        let rh = b.ok(&format!("vretain {}", hexptr(at))).val(0).to_owned();
        assert_eq!(rh, bh);
        teardown(&mut b, &bh, &bva, G);
        teardown(&mut a, &h, &va, G);
        a.exit();
        b.exit();
        root.assert_clean();
    }
}

#[test]
fn the_os_handle_convention_follows_the_version() {
    if !pidfd_between_children("the_os_handle_convention_follows_the_version") {
        return;
    }
    for (version, wrong) in [("7.0", "val"), ("7.1", "ptr")] {
        let root = TestRoot::new(&format!("hip-vmm-convention-{version}"));
        let mut a = Hip::spawn("exporter", &root, version, &[]);
        let mut b = Hip::spawn("importer", &root, version, &[]);
        let (h, va) = create_and_map(&mut a, G, POSIX);
        let fd = a.ok(&format!("vexport {h} {POSIX}")).num(0);
        let local = b.ok(&format!("vgetfd {} {fd}", a.pid())).num(0);
        b.expect_rule(
            &format!("vimport {local} {wrong}"),
            hipErrorInvalidValue,
            VMM_IMPORT_OS_HANDLE_CONVENTION,
        );
        b.ok(&format!("vclose {local}"));
        a.ok(&format!("vclose {fd}"));
        teardown(&mut a, &h, &va, G);
        a.exit();
        b.exit();
        root.assert_clean();
    }
}

#[test]
fn vmm_rule_violations_return_the_vendors_codes() {
    let root = TestRoot::new("hip-vmm-rules");
    let mut a = Hip::spawn("a", &root, "6.2", &[]);
    let inv = hipErrorInvalidValue;
    assert_eq!(a.ok("vgran 0").num(0), G);
    a.expect_rule("vgran 7", inv, VMM_ARGS_VALID);
    a.expect_rule(&format!("vcreate {G} {POSIX} 1 0 1"), inv, VMM_ARGS_VALID);
    a.expect_rule(
        &format!("vcreate {G} {POSIX} 0"),
        inv,
        VMM_PROP_PINNED_DEVICE,
    );
    a.expect_code(&format!("vcreate {G} {POSIX} 1 7"), hipErrorInvalidDevice);
    a.expect_rule("vcreate 4096 1", inv, VMM_GRANULARITY_ALIGNED);
    a.expect_rule(
        &format!("vcreate {G} {hipMemHandleTypeFabric}"),
        hipErrorNotSupported,
        VMM_HANDLE_TYPE_SUPPORTED,
    );
    a.expect_rule("vreserve 4096", inv, VMM_GRANULARITY_ALIGNED);
    a.expect_rule(&format!("vreserve {G} 3"), inv, VMM_GRANULARITY_ALIGNED);
    // An allocation without a handle type cannot be exported as an fd.
    let (h0, va0) = create_and_map(&mut a, G, hipMemHandleTypeNone);
    a.expect_rule(
        &format!("vexport {h0} {POSIX}"),
        inv,
        VMM_EXPORT_HANDLE_TYPE_MATCHES,
    );
    teardown(&mut a, &h0, &va0, G);
    let h = a
        .ok(&format!("vcreate {} {POSIX}", 2 * G))
        .val(0)
        .to_owned();
    a.expect_rule(&format!("vexport {h} {POSIX} 1"), inv, VMM_ARGS_VALID);
    let va = a.ok(&format!("vreserve {}", 4 * G)).val(0).to_owned();
    let vau = parse_num(&va).unwrap();
    a.expect_rule(&format!("vmap {va} {G} {h} {G}"), inv, VMM_ARGS_VALID);
    a.expect_rule(&format!("vmap {va} {G} {h} 0 1"), inv, VMM_ARGS_VALID);
    a.expect_rule(&format!("vmap {va} 4096 {h}"), inv, VMM_GRANULARITY_ALIGNED);
    a.expect_rule(
        &format!("vmap {va} {} {h}", 4 * G),
        inv,
        VMM_MAP_INTO_RESERVATION,
    );
    a.expect_rule(
        &format!("vmap {} {} {h}", hexptr(vau + 3 * G), 2 * G),
        inv,
        VMM_MAP_INTO_RESERVATION,
    );
    // Two maps of the same handle (each a reference), side by side.
    a.ok(&format!("vmap {va} {} {h}", 2 * G));
    a.expect_rule(&format!("vmap {va} {G} {h}"), inv, VMM_MAP_INTO_RESERVATION);
    a.ok(&format!("vmap {} {G} {h}", hexptr(vau + 2 * G)));
    // Partial coverage of mappings.
    a.expect_rule(&format!("vunmap {va} {G}"), inv, VMM_WHOLE_MAPPINGS);
    a.expect_rule(&format!("vaccess {va} {G} 0 {RW}"), inv, VMM_WHOLE_MAPPINGS);
    a.expect_rule(
        &format!("vaccess {} {G} 0 {RW}", hexptr(vau + G)),
        inv,
        VMM_WHOLE_MAPPINGS,
    );
    a.expect_rule(&format!("vaccess {va} {} 0 2", 3 * G), inv, VMM_ARGS_VALID);
    a.ok(&format!("vaccess {va} {} 0 {RW}", 3 * G));
    // The reservation is still mapped.
    a.expect_rule(
        &format!("vfree {va} {}", 4 * G),
        inv,
        VMM_UNMAP_BEFORE_ADDRESS_FREE,
    );
    // hipMalloc memory: no allocation handle, not VMM; VMM memory: no legacy IPC.
    let m = a.ok("malloc 65536").num(0);
    a.expect_rule(
        &format!("vretain {}", hexptr(m)),
        inv,
        VMM_RETAIN_NEEDS_VMM_MEMORY,
    );
    a.expect_rule(&format!("export {va}"), inv, VMM_LEGACY_IPC_REFUSED);
    // An fd that is no exported allocation (stdin, a pipe).
    a.expect_rule("vimport 0 ptr", inv, VMM_IMPORT_EXPORTED_FD);
    a.ok(&format!("vunmap {va} {}", 3 * G));
    a.ok(&format!("vrelease {h}"));
    // All references are gone: the handle is dead.
    a.expect_rule(&format!("vrelease {h}"), inv, VMM_HANDLE_VALID);
    a.expect_rule(&format!("vmap {va} {G} {h}"), inv, VMM_HANDLE_VALID);
    a.ok(&format!("vfree {va} {}", 4 * G));
    a.ok(&format!("free {}", hexptr(m)));
    a.exit();
    root.assert_clean();
}

#[test]
fn copies_need_access_and_a_violation_is_recorded() {
    let root = TestRoot::new("hip-vmm-access");
    let mut a = Hip::spawn("a", &root, "6.2", &[]);
    let (h, va) = create_and_map(&mut a, G, POSIX);
    a.expect_rule(
        &format!("fill {va} 4096 1"),
        hipErrorIllegalAddress,
        VMM_ACCESS_REQUIRED,
    );
    a.ok(&format!("vaccess {va} {G} 0 {}", hipMemAccessFlagsProtRead));
    // Readable (all zero), not writable.
    assert_eq!(a.ok(&format!("readbyte {va}")).num(0), 0);
    a.expect_rule(
        &format!("memset {va} 1 4096"),
        hipErrorIllegalAddress,
        VMM_ACCESS_REQUIRED,
    );
    teardown(&mut a, &h, &va, G);
    a.exit();
    let state = root.state();
    let records = violations::read(state.dir()).unwrap();
    assert!(
        records.len() >= 2 && records.iter().all(|v| v.rule == VMM_ACCESS_REQUIRED),
        "{records:?}"
    );
    std::fs::remove_file(state.dir().join(violations::VIOLATIONS)).unwrap();
    root.assert_clean();
}

#[test]
fn export_is_not_supported_before_rocm_6_2() {
    for version in ["5.2", "6.1"] {
        let root = TestRoot::new(&format!("hip-vmm-old-{version}"));
        let mut a = Hip::spawn("a", &root, version, &[]);
        // On 5.2 the shell passes the ROCm 5.2 prop layout; the properties read back.
        let (h, va) = create_and_map(&mut a, G, POSIX);
        let prop = a.ok(&format!("vprop {h}"));
        assert_eq!(
            (prop.num(0), prop.num(1), prop.num(2), prop.num(3)),
            (1, POSIX as u64, 1, 0)
        );
        a.expect_rule(
            &format!("vexport {h} {POSIX}"),
            hipErrorNotSupported,
            VMM_IPC_NEEDS_ROCM_6_2,
        );
        a.ok(&format!("vaccess {va} {G} 0 {RW}"));
        a.ok(&format!("fill {va} 4096 3"));
        teardown(&mut a, &h, &va, G);
        a.exit();
        root.assert_clean();
    }
}

#[test]
fn the_legacy_ipc_attribute_tells_the_memory_kinds_apart() {
    for version in ["6.2", "7.12"] {
        let root = TestRoot::new(&format!("hip-vmm-attr-{version}"));
        let mut a = Hip::spawn("a", &root, version, &[]);
        let (h, va) = create_and_map(&mut a, G, POSIX);
        let m = a.ok("malloc 65536").num(0);
        let attr = HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE;
        if at_least(version, 7, 12) {
            assert_eq!(a.ok(&format!("vattr {attr} {va}")).num(0), 0);
            assert_eq!(a.ok(&format!("vattr {attr} {}", hexptr(m))).num(0), 1);
        } else {
            a.expect_code(&format!("vattr {attr} {va}"), hipErrorNotSupported);
        }
        assert_eq!(
            a.ok(&format!("vattr {HIP_POINTER_ATTRIBUTE_RANGE_SIZE} {va}"))
                .num(0),
            G
        );
        a.ok(&format!("free {}", hexptr(m)));
        teardown(&mut a, &h, &va, G);
        a.exit();
        root.assert_clean();
    }
}

#[test]
fn a_killed_exporter_leaves_the_importers_mapping_and_nothing_after_both_exit() {
    if !pidfd_between_children(
        "a_killed_exporter_leaves_the_importers_mapping_and_nothing_after_both_exit",
    ) {
        return;
    }
    let version = "7.1";
    let root = TestRoot::new("hip-vmm-kill");
    let mut a = Hip::spawn("exporter", &root, version, &[]);
    let mut b = Hip::spawn("importer", &root, version, &[]);
    let (h, va) = create_and_map(&mut a, G, POSIX);
    a.ok(&format!("vaccess {va} {G} 0 {RW}"));
    a.ok(&format!("fill {va} 65536 4"));
    let (bh, bva) = share(&mut a, &mut b, &h, version);
    b.ok(&format!("vaccess {bva} {G} 0 {RW}"));
    a.kill();
    assert_eq!(b.ok(&format!("check {bva} 65536 4")).val(0), "same");
    b.ok(&format!("fill {bva} 65536 6"));
    assert_eq!(b.ok(&format!("check {bva} 65536 6")).val(0), "same");
    // B is killed too, with everything still mapped.
    b.kill();
    let state = root.state();
    state.gc().unwrap();
    root.assert_clean();
    let _ = (bh, h);
}

/// Issue 25: from ROCm 7.12 `hipMemSetAccess` takes a host descriptor (CPU access; the id
/// is ignored), which leaves the devices' access as it was; before, the host location is
/// refused; `hipMemGetAccess` of the host is refused on every version (CLR).
#[test]
fn host_access_is_accepted_from_rocm_7_12() {
    let host = hipMemLocationTypeHost;
    for version in ["6.2", "7.0", "7.12"] {
        let root = TestRoot::new(&format!("hip-vmm-host-{version}"));
        let mut a = Hip::spawn("a", &root, version, &[]);
        let (h, va) = create_and_map(&mut a, G, POSIX);
        if version == "7.12" {
            a.ok(&format!("vaccess {va} {G} 0 {RW} {host}"));
            a.ok(&format!(
                "vaccess {va} {G} 7 {} {host}",
                hipMemAccessFlagsProtRead
            ));
            // Unknown flags are refused for the host too.
            a.expect_rule(
                &format!("vaccess {va} {G} 0 2 {host}"),
                hipErrorInvalidValue,
                VMM_ARGS_VALID,
            );
            // Part of a mapping is refused whatever the location.
            a.expect_rule(
                &format!("vaccess {va} 4096 0 {RW} {host}"),
                hipErrorInvalidValue,
                VMM_WHOLE_MAPPINGS,
            );
        } else {
            a.expect_rule(
                &format!("vaccess {va} {G} 0 {RW} {host}"),
                hipErrorInvalidValue,
                VMM_HOST_ACCESS_ACCEPTED,
            );
        }
        // The host grant gives no device access.
        assert_eq!(a.ok(&format!("vgetaccess {va} 0")).num(0), 0);
        a.expect_rule(
            &format!("fill {va} 4096 1"),
            hipErrorIllegalAddress,
            VMM_ACCESS_REQUIRED,
        );
        // HostNuma is not modelled.
        a.expect_rule(
            &format!("vaccess {va} {G} 0 {RW} {}", hipMemLocationTypeHostNuma),
            hipErrorInvalidValue,
            VMM_ARGS_VALID,
        );
        a.ok(&format!("vaccess {va} {G} 0 {RW}"));
        a.ok(&format!("fill {va} 4096 1"));
        teardown(&mut a, &h, &va, G);
        a.exit();
        let state = root.state();
        std::fs::remove_file(state.dir().join(violations::VIOLATIONS)).unwrap();
        root.assert_clean();
    }
}

// ---------------------------------------------------------------------------------------
// Broken rules: the scenario behaves differently with the rule switched off.

fn broken(rule: &str, version: &str, scenario: impl FnOnce(&mut Hip)) {
    let root = TestRoot::new(&format!("hip-vmm-broken-{rule}"));
    let mut a = Hip::spawn("a", &root, version, &[("DEVIPC_EMU_BREAK_RULE", rule)]);
    scenario(&mut a);
    a.exit();
    root.assert_clean();
}

#[test]
fn broken_vmm_rules_change_the_outcome() {
    broken(VMM_ACCESS_REQUIRED, "6.2", |a| {
        let (h, va) = create_and_map(a, G, POSIX);
        a.ok(&format!("fill {va} 4096 1"));
        assert_eq!(a.ok(&format!("check {va} 4096 1")).val(0), "same");
        teardown(a, &h, &va, G);
    });
    broken(VMM_GRANULARITY_ALIGNED, "6.2", |a| {
        let h = a.ok("vcreate 4096 1").val(0).to_owned();
        a.ok(&format!("vrelease {h}"));
    });
    broken(VMM_HANDLE_TYPE_SUPPORTED, "6.2", |a| {
        let h = a.ok("vcreate 2097152 8").val(0).to_owned();
        a.ok(&format!("vrelease {h}"));
    });
    broken(VMM_PROP_PINNED_DEVICE, "6.2", |a| {
        let h = a.ok("vcreate 2097152 1 0").val(0).to_owned();
        a.ok(&format!("vrelease {h}"));
    });
    broken(VMM_IPC_NEEDS_ROCM_6_2, "6.1", |a| {
        let (h, va) = create_and_map(a, G, POSIX);
        let fd = a.ok(&format!("vexport {h} {POSIX}")).num(0);
        a.ok(&format!("vclose {fd}"));
        teardown(a, &h, &va, G);
    });
    broken(VMM_ADDRESS_RANGE_IS_MAPPING, "6.2", |a| {
        let (h, va) = create_and_map(a, G, POSIX);
        a.expect_code(&format!("range {va}"), hipErrorNotFound);
        teardown(a, &h, &va, G);
    });
    broken(VMM_UNMAP_BEFORE_ADDRESS_FREE, "6.2", |a| {
        let (h, va) = create_and_map(a, G, POSIX);
        a.ok(&format!("vfree {va} {G}"));
        // The mapping went with the reservation; its reference is dropped by hand.
        a.ok(&format!("vrelease {h}"));
        a.ok(&format!("vrelease {h}"));
    });
    broken(VMM_HOST_ACCESS_ACCEPTED, "7.12", |a| {
        let (h, va) = create_and_map(a, G, POSIX);
        a.expect_rule(
            &format!("vaccess {va} {G} 0 {RW} {}", hipMemLocationTypeHost),
            hipErrorInvalidValue,
            VMM_HOST_ACCESS_ACCEPTED,
        );
        teardown(a, &h, &va, G);
    });
    let _ = rules::ALL;
}

/// Whether this test's children may take each other's descriptors with `pidfd_getfd`
/// (siblings: Yama's ptrace scope may forbid it); skips loudly when not.
pub(crate) fn pidfd_between_children(test: &str) -> bool {
    match devipc_testkit::sibling_pidfd_getfd_refused() {
        Some(reason) => {
            devipc_testkit::skip(test, &reason);
            false
        }
        None => true,
    }
}
