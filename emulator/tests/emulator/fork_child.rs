//! A process that `fork`s after using a runtime (Python's default start method on Linux
//! before 3.14) gives its child none of its state (issue 23 item 8, audit N8 and m9).
//!
//! A "forker" child of the test (single-threaded, so the fork is clean) initialises the
//! runtime in process, allocates, writes, exports memory, and creates a stream, an event
//! and (ACL) a notify; then it forks without exec. The forked child checks that every
//! inherited handle fails with the vendor's invalid-handle code (ACL 107017
//! `ACL_ERROR_RT_INVALID_HANDLE`, HIP 400 `hipErrorInvalidHandle`, the message naming the
//! fork) and every inherited pointer is unknown memory, that no device is current (ACL)
//! or device 0 is (HIP), and that a fresh start works: it allocates and exports its own
//! memory and imports the parent's export as any other process would. It reports on a
//! pipe and `_exit`s. The forker then checks its own objects are intact (bytes, stream,
//! event, notify, export), releases everything, and the state directory must be clean.

use std::ffi::{c_char, c_int, c_void};
use std::ptr;

use devipc_ascend_sys::consts::{
    ACL_EVENT_SYNC, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
    ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION,
};
use devipc_ascend_sys::types::{ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE};
use devipc_hip_sys::consts::{
    hipErrorInvalidHandle, hipEventDisableTiming, hipEventInterprocess, hipMemcpyDeviceToHost,
    hipMemcpyHostToDevice, ipc_mem_lazy_enable_peer_access,
};
use devipc_hip_sys::types::{hipIpcMemHandle_t, hipStream_t};
use devipc_testkit::{Child, Parent, TestRoot};

use crate::acl_support::key_text;
use crate::emu_support::{EmuRoot, child_entry, pattern};

const LEN: usize = 4096;

#[test]
fn child_role() {
    devipc_testkit::run_child(|role, parent| match role {
        "acl" => acl_forker(parent),
        "hip" => hip_forker(parent),
        other => Err(format!("unknown role {other}")),
    });
}

/// A failed step: what, and the code.
fn step(what: &str, code: impl Into<i64>, want: i64) -> Result<(), String> {
    let code = code.into();
    if code == want {
        Ok(())
    } else {
        Err(format!("{what}: {code}, expected {want}"))
    }
}

/// Forks; the child runs `child` and `_exit`s, reporting on a pipe; the parent returns
/// the child's report (`Ok` when it passed).
fn fork_and_check(child: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: a valid array of two fds.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the caller is single-threaded here (a test child running one test: the
    // stream workers have ended, see `idle`); the child only runs `child`, writes and
    // exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        let report = match child() {
            Ok(()) => "ok".to_owned(),
            Err(e) => e,
        };
        // SAFETY: the write end of the pipe, a buffer of that length; `_exit` skips the
        // parent's atexit handlers and buffers, as a forked child must.
        unsafe {
            libc::write(fds[1], report.as_ptr().cast(), report.len());
            libc::_exit(0);
        }
    }
    // SAFETY: the parent's copy of the write end, not used again.
    unsafe { libc::close(fds[1]) };
    let mut status = 0;
    // SAFETY: our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let mut buf = vec![0u8; 4096];
    // SAFETY: the read end, into a buffer of that length.
    let n = unsafe { libc::read(fds[0], buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: the read end, not used again.
    unsafe { libc::close(fds[0]) };
    let report = String::from_utf8_lossy(&buf[..n.max(0) as usize]).into_owned();
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!(
            "the forked child ended with status {status:#x}: {report}"
        ));
    }
    if report == "ok" {
        Ok(())
    } else {
        Err(format!("the forked child: {report}"))
    }
}

fn acl_forker(parent: &Parent) -> Result<(), String> {
    let api = devipc_emulator::acl_api();
    macro_rules! opt {
        ($f:ident) => {
            api.$f.ok_or(concat!(stringify!($f), " missing"))?
        };
    }
    let key_export = opt!(aclrtIpcMemGetExportKey);
    let key_import = opt!(aclrtIpcMemImportByKey);
    let key_close = opt!(aclrtIpcMemClose);
    let notify_create = opt!(aclrtCreateNotify);
    let notify_destroy = opt!(aclrtDestroyNotify);
    let notify_export = opt!(aclrtNotifyGetExportKey);
    let record = opt!(aclrtRecordNotify);
    let wait = opt!(aclrtWaitAndResetNotify);
    let event_create = opt!(aclrtCreateEventExWithFlag);
    let event_record = opt!(aclrtRecordEvent);
    let event_destroy = opt!(aclrtDestroyEvent);

    let data = pattern(7, LEN);
    let mut p: *mut c_void = ptr::null_mut();
    let mut stream: *mut c_void = ptr::null_mut();
    let mut notify: *mut c_void = ptr::null_mut();
    let mut event: *mut c_void = ptr::null_mut();
    let mut key = [0 as c_char; 65];
    let mut nkey = [0 as c_char; 65];
    // SAFETY: valid out-pointers and buffers of the sizes passed (here and in the blocks
    // below); every handle and device pointer is looked up by the emulator.
    unsafe {
        step("aclrtSetDevice", (api.aclrtSetDevice)(0), 0)?;
        step("aclrtMalloc", (api.aclrtMalloc)(&mut p, LEN, 0), 0)?;
        step(
            "aclrtMemcpy H2D",
            (api.aclrtMemcpy)(p, LEN, data.as_ptr().cast(), LEN, ACL_MEMCPY_HOST_TO_DEVICE),
            0,
        )?;
        let flags = ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION;
        step(
            "key export",
            key_export(p, LEN, key.as_mut_ptr(), 65, flags),
            0,
        )?;
        step("aclrtCreateStream", (api.aclrtCreateStream)(&mut stream), 0)?;
        step("aclrtCreateNotify", notify_create(&mut notify, 0), 0)?;
        let flags = ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION;
        step(
            "notify export",
            notify_export(notify, nkey.as_mut_ptr(), 65, flags),
            0,
        )?;
        step("event create", event_create(&mut event, ACL_EVENT_SYNC), 0)?;
    }

    fork_and_check(|| {
        // SAFETY: as above.
        unsafe {
            // The thread that forked had device 0 current; the child has none.
            let mut d = -1;
            step(
                "aclrtGetDevice in the child",
                (api.aclrtGetDevice)(&mut d),
                107002,
            )?;
            // Inherited handles are invalid handles, and say why.
            step("inherited notify", record(notify, ptr::null_mut()), 107017)?;
            let message = std::ffi::CStr::from_ptr((api.aclGetRecentErrMsg)())
                .to_string_lossy()
                .into_owned();
            if !message.contains("forked") {
                return Err(format!("the message does not name the fork: {message}"));
            }
            step(
                "inherited stream",
                (api.aclrtSynchronizeStream)(stream),
                107017,
            )?;
            step(
                "inherited event",
                event_record(event, ptr::null_mut()),
                107017,
            )?;
            step("inherited notify destroy", notify_destroy(notify), 107017)?;
            // Inherited pointers are not device memory of this process.
            step("inherited pointer free", (api.aclrtFree)(p), 107000)?;
            let mut out = vec![0u8; LEN];
            let code = (api.aclrtMemcpy)(
                out.as_mut_ptr().cast(),
                LEN,
                p,
                LEN,
                ACL_MEMCPY_DEVICE_TO_HOST,
            );
            step("inherited pointer copy", code, 107000)?;
            // A fresh start works: its own memory, its own export, and the parent's export
            // imported as by any other process.
            step("aclrtSetDevice in the child", (api.aclrtSetDevice)(0), 0)?;
            let mut q: *mut c_void = ptr::null_mut();
            step(
                "aclrtMalloc in the child",
                (api.aclrtMalloc)(&mut q, LEN, 0),
                0,
            )?;
            let mut qkey = [0 as c_char; 65];
            let flags = ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION;
            step(
                "key export in the child",
                key_export(q, LEN, qkey.as_mut_ptr(), 65, flags),
                0,
            )?;
            let mut imported: *mut c_void = ptr::null_mut();
            step(
                "import of the parent's key",
                key_import(&mut imported, key.as_ptr(), 0),
                0,
            )?;
            let code = (api.aclrtMemcpy)(
                out.as_mut_ptr().cast(),
                LEN,
                imported,
                LEN,
                ACL_MEMCPY_DEVICE_TO_HOST,
            );
            step("copy from the import", code, 0)?;
            if out != data {
                return Err("the import does not show the parent's bytes".into());
            }
            step("close of the import", key_close(key.as_ptr()), 0)?;
            step("close of the child's key", key_close(qkey.as_ptr()), 0)?;
            step("aclrtFree in the child", (api.aclrtFree)(q), 0)?;
            let mut n: *mut c_void = ptr::null_mut();
            step("notify in the child", notify_create(&mut n, 0), 0)?;
            step("notify destroy in the child", notify_destroy(n), 0)?;
        }
        Ok(())
    })?;

    // The forker's objects are intact.
    // SAFETY: as above.
    unsafe {
        let mut out = vec![0u8; LEN];
        let code = (api.aclrtMemcpy)(
            out.as_mut_ptr().cast(),
            LEN,
            p,
            LEN,
            ACL_MEMCPY_DEVICE_TO_HOST,
        );
        step("copy after the fork", code, 0)?;
        if out != data {
            return Err("the forker's bytes changed".into());
        }
        step("record after the fork", record(notify, stream), 0)?;
        step("wait after the fork", wait(notify, stream, 5), 0)?;
        step("event after the fork", event_record(event, stream), 0)?;
        step(
            "stream after the fork",
            (api.aclrtSynchronizeStream)(stream),
            0,
        )?;
        step("event destroy", event_destroy(event), 0)?;
        step("notify destroy", notify_destroy(notify), 0)?;
        step("stream destroy", (api.aclrtDestroyStream)(stream), 0)?;
        step("key close", key_close(key.as_ptr()), 0)?;
        step("aclrtFree", (api.aclrtFree)(p), 0)?;
    }
    parent.say("done", &key_text(&nkey));
    Ok(())
}

fn hip_forker(parent: &Parent) -> Result<(), String> {
    let api = devipc_emulator::hip_api();
    let data = pattern(9, LEN);
    let mut p: *mut c_void = ptr::null_mut();
    let mut h = hipIpcMemHandle_t::zeroed();
    let mut stream: hipStream_t = ptr::null_mut();
    let mut event = ptr::null_mut();
    let mut version: c_int = 0;
    // SAFETY: valid out-pointers and buffers of the sizes passed (here and in the blocks
    // below); every handle and device pointer is looked up by the emulator.
    unsafe {
        step(
            "hipRuntimeGetVersion",
            (api.hipRuntimeGetVersion)(&mut version),
            0,
        )?;
        step("hipSetDevice", (api.hipSetDevice)(1), 0)?;
        step("hipMalloc", (api.hipMalloc)(&mut p, LEN), 0)?;
        let code = (api.hipMemcpy)(p, data.as_ptr().cast(), LEN, hipMemcpyHostToDevice);
        step("hipMemcpy H2D", code, 0)?;
        step("hipIpcGetMemHandle", (api.hipIpcGetMemHandle)(&mut h, p), 0)?;
        step("hipStreamCreate", (api.hipStreamCreate)(&mut stream), 0)?;
        let flags = hipEventInterprocess | hipEventDisableTiming;
        step(
            "hipEventCreateWithFlags",
            (api.hipEventCreateWithFlags)(&mut event, flags),
            0,
        )?;
    }
    let invalid_handle = i64::from(hipErrorInvalidHandle);
    let invalid_value = 1;

    fork_and_check(|| {
        // SAFETY: as above.
        unsafe {
            // HIP starts a process on device 0; the thread that forked was on device 1.
            let mut d: c_int = -1;
            step("hipGetDevice in the child", (api.hipGetDevice)(&mut d), 0)?;
            step("the child's device", d, 0)?;
            // Inherited handles are invalid handles.
            step(
                "inherited stream",
                (api.hipStreamSynchronize)(stream),
                invalid_handle,
            )?;
            step(
                "inherited event",
                (api.hipEventRecord)(event, ptr::null_mut()),
                invalid_handle,
            )?;
            step(
                "inherited event destroy",
                (api.hipEventDestroy)(event),
                invalid_handle,
            )?;
            // Inherited pointers are not device memory of this process.
            step("inherited pointer free", (api.hipFree)(p), invalid_value)?;
            let mut h2 = hipIpcMemHandle_t::zeroed();
            step(
                "inherited pointer export",
                (api.hipIpcGetMemHandle)(&mut h2, p),
                invalid_value,
            )?;
            // A fresh start works: its own memory and export, and the parent's export
            // opened as by any other process.
            let mut q: *mut c_void = ptr::null_mut();
            step("hipMalloc in the child", (api.hipMalloc)(&mut q, LEN), 0)?;
            step(
                "export in the child",
                (api.hipIpcGetMemHandle)(&mut h2, q),
                0,
            )?;
            let mut opened: *mut c_void = ptr::null_mut();
            let flags = ipc_mem_lazy_enable_peer_access(version);
            step(
                "open of the parent's handle",
                (api.hipIpcOpenMemHandle)(&mut opened, h, flags),
                0,
            )?;
            let mut out = vec![0u8; LEN];
            let code = (api.hipMemcpy)(out.as_mut_ptr().cast(), opened, LEN, hipMemcpyDeviceToHost);
            step("copy from the open", code, 0)?;
            if out != data {
                return Err("the open does not show the parent's bytes".into());
            }
            step("close of the open", (api.hipIpcCloseMemHandle)(opened), 0)?;
            step("hipFree in the child", (api.hipFree)(q), 0)?;
            let mut s: hipStream_t = ptr::null_mut();
            step("stream in the child", (api.hipStreamCreate)(&mut s), 0)?;
            step("stream destroy in the child", (api.hipStreamDestroy)(s), 0)?;
        }
        Ok(())
    })?;

    // SAFETY: as above.
    unsafe {
        let mut d: c_int = -1;
        step("hipGetDevice after the fork", (api.hipGetDevice)(&mut d), 0)?;
        step("the forker's device", d, 1)?;
        let mut out = vec![0u8; LEN];
        let code = (api.hipMemcpy)(out.as_mut_ptr().cast(), p, LEN, hipMemcpyDeviceToHost);
        step("copy after the fork", code, 0)?;
        if out != data {
            return Err("the forker's bytes changed".into());
        }
        let mut again = hipIpcMemHandle_t::zeroed();
        step(
            "export after the fork",
            (api.hipIpcGetMemHandle)(&mut again, p),
            0,
        )?;
        step(
            "event after the fork",
            (api.hipEventRecord)(event, stream),
            0,
        )?;
        step(
            "stream after the fork",
            (api.hipStreamSynchronize)(stream),
            0,
        )?;
        step("hipEventDestroy", (api.hipEventDestroy)(event), 0)?;
        step("hipStreamDestroy", (api.hipStreamDestroy)(stream), 0)?;
        step("hipFree", (api.hipFree)(p), 0)?;
    }
    parent.say("done", "");
    Ok(())
}

fn forked_child_starts_afresh(vendor: &str) {
    let root = TestRoot::new(&format!("fork-{vendor}"));
    let mut forker = Child::build(&child_entry(), vendor, &root).spawn();
    forker.expect("done");
    forker.wait_success();
    root.assert_clean();
}

#[test]
fn acl_forked_child_starts_afresh_and_leaves_the_parent_intact() {
    forked_child_starts_afresh("acl");
}

#[test]
fn hip_forked_child_starts_afresh_and_leaves_the_parent_intact() {
    forked_child_starts_afresh("hip");
}
