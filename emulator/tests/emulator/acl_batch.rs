//! Issue 25: `aclrtMemcpyBatchAsync` in a real child process (see `acl_support`): the ACL
//! wrapper's argument checks, the runtime's checks of the attribute indexes and of each
//! descriptor, `*failIndex`, and the copies before a failing descriptor.
//!
//! The shell command `ab-copy` is executed by [`exec`], reached from the ACL shell of
//! `acl_support`.

use std::ffi::{CStr, c_void};

use crate::acl_support::{AclRoot, EmuRoot, TestRoot};
use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::types::{
    ACL_MEM_LOCATION_TYPE_DEVICE, ACL_MEM_LOCATION_TYPE_HOST, aclrtMemLocation,
    aclrtMemcpyBatchAttr,
};
use devipc_emulator::acl::rules;

/// What `*failIndex` holds before the call.
const UNTOUCHED: usize = 0x5eed;

/// Entry point of the child processes; a no-op in the parent run.
#[test]
fn child_role() {
    crate::acl_support::child_main();
}

// ---------------------------------------------------------------------------------------
// Child side.

/// Whether `cmd` is one of this module's shell commands.
pub fn is_command(cmd: &str) -> bool {
    cmd.starts_with("ab-")
}

fn attr(spec: &str) -> aclrtMemcpyBatchAttr {
    let host = aclrtMemLocation {
        id: 0,
        r#type: ACL_MEM_LOCATION_TYPE_HOST,
    };
    let dev = |id| aclrtMemLocation {
        id,
        r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
    };
    let (dst, src, rsv) = match spec {
        "h2d" => (dev(0), host, 0),
        "d2h" => (host, dev(0), 0),
        "d2d" => (dev(0), dev(0), 0),
        "dev1" => (dev(1), host, 0),
        _ => (dev(0), host, 1),
    };
    let mut a = aclrtMemcpyBatchAttr {
        dstLoc: dst,
        srcLoc: src,
        rsv: [0; 16],
    };
    a.rsv[0] = rsv;
    a
}

/// `ab-copy <numBatches> <attrs: h2d|d2h|d2d|dev1|rsv,...> <indexes: i,...>
/// [<dst> <destMax> <src> <size>]...` on the default stream of the current device, then
/// `aclrtSynchronizeStream`; an operand `hN` is offset N of a host buffer of 8 KiB filled
/// with 0xab. Replies `<failIndex>`; a failure's message ends with ` failIndex=<n>`.
pub fn exec(api: &AclApi, cmd: &str, args: &[&str]) -> Result<(i32, Vec<String>), (i32, String)> {
    if cmd != "ab-copy" || args.len() < 3 {
        return Err((-1, format!("shell: {cmd} {args:?}")));
    }
    let mut host = vec![0xabu8; 8192];
    let base = host.as_mut_ptr();
    let operand = |t: &str| -> *mut c_void {
        match t.strip_prefix('h') {
            // SAFETY: the tests pass offsets inside the 8 KiB buffer.
            Some(off) => unsafe { base.add(off.parse().unwrap()) }.cast(),
            None => ptr_of(t),
        }
    };
    let num_batches: usize = args[0].parse().unwrap();
    let mut attrs: Vec<_> = args[1].split(',').map(attr).collect();
    let mut idxs: Vec<usize> = args[2]
        .split(',')
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().unwrap())
        .collect();
    let (mut dsts, mut maxs, mut srcs, mut sizes) = (vec![], vec![], vec![], vec![]);
    for d in args[3..].chunks(4) {
        dsts.push(operand(d[0]));
        maxs.push(d[1].parse::<usize>().unwrap());
        srcs.push(operand(d[2]));
        sizes.push(d[3].parse::<usize>().unwrap());
    }
    let f = api
        .aclrtMemcpyBatchAsync
        .expect("the emulator has the batch");
    let mut fail_index = UNTOUCHED;
    // SAFETY: the descriptor arrays hold `numBatches` elements (the tests pass that many),
    // the attribute arrays at least `idxs.len()`; host operands point into `host`, alive
    // until after the synchronisation; device operands are the child's own memory (or bad
    // on purpose).
    let code = unsafe {
        f(
            dsts.as_mut_ptr(),
            maxs.as_mut_ptr(),
            srcs.as_mut_ptr(),
            sizes.as_mut_ptr(),
            num_batches,
            attrs.as_mut_ptr(),
            idxs.as_mut_ptr(),
            idxs.len(),
            &mut fail_index,
            std::ptr::null_mut(),
        )
    };
    if code != 0 {
        // SAFETY: NULL or a NUL-terminated string valid until the next call.
        let p = unsafe { (api.aclGetRecentErrMsg)() };
        let message = if p.is_null() {
            String::new()
        } else {
            // SAFETY: as above.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        };
        return Err((code, format!("{message} failIndex={fail_index}")));
    }
    // SAFETY: the default stream.
    let synced = unsafe { (api.aclrtSynchronizeStream)(std::ptr::null_mut()) };
    drop(host);
    Ok((synced, vec![fail_index.to_string()]))
}

fn ptr_of(t: &str) -> *mut c_void {
    let v = u64::from_str_radix(t.trim_start_matches("0x"), 16).unwrap();
    std::ptr::with_exposed_provenance_mut(v as usize)
}

// ---------------------------------------------------------------------------------------
// Parent side.

#[test]
fn the_wrapper_and_runtime_checks_hold() {
    let root = TestRoot::new("acl-batch");
    let mut a = root.spawn("a", &[]);
    a.ok("set-device 0");
    let d = a.val("malloc 4096");
    a.ok(&format!("write {d} 1 4096"));
    let idx = |f: &crate::acl_support::Failure| f.message.rsplit('=').next().unwrap().to_owned();

    // The ACL wrapper: 100000, *failIndex untouched.
    let f = a.fail(&format!("ab-copy 0 h2d 0 {d} 4096 h0 64"));
    f.expect(100_000, rules::BATCH_COUNT_NONZERO);
    assert_eq!(idx(&f), UNTOUCHED.to_string());
    let f = a.fail(&format!("ab-copy 1 h2d 0 {d} 32 h0 64"));
    f.expect(100_000, rules::BATCH_DEST_MAX_COVERS_SIZE);
    assert_eq!(idx(&f), UNTOUCHED.to_string());
    a.fail(&format!("ab-copy 1 rsv 0 {d} 4096 h0 64"))
        .expect(100_000, rules::BATCH_ATTR_RSV_ZERO);

    // The runtime: attribute indexes (SIZE_MAX), then each descriptor (its index).
    let f = a.fail(&format!("ab-copy 2 h2d 1 {d} 4096 h0 64 {d} 4096 h0 64"));
    f.expect(107_000, rules::BATCH_ATTR_INDEXES_VALID);
    assert_eq!(idx(&f), usize::MAX.to_string());
    let f = a.fail(&format!("ab-copy 2 h2d 0 {d} 4096 h0 64 {d} 4096 h0 0"));
    f.expect(107_000, rules::BATCH_DESCRIPTOR_VALID);
    assert_eq!(idx(&f), "1");
    let f = a.fail(&format!("ab-copy 1 dev1 0 {d} 4096 h0 64"));
    f.expect(107_000, rules::BATCH_LOCATIONS_MATCH);
    assert_eq!(idx(&f), "0");
    let f = a.fail(&format!("ab-copy 1 d2d 0 {d} 4096 {d} 64"));
    f.expect(107_000, rules::BATCH_HOST_DEVICE_ONLY);
    assert_eq!(idx(&f), "0");

    // rules::BATCH_FAIL_INDEX_REPORTED: a successful batch leaves *failIndex alone.
    let r = a.ok(&format!(
        "ab-copy 2 h2d,d2h 0,1 {d} 4096 h0 4096 h4096 4096 {d} 4096"
    ));
    assert_eq!(r, [UNTOUCHED.to_string()]);

    // rules::BATCH_EARLIER_COPIES_RUN: descriptor 0 is copied, descriptor 2 is not.
    let d128 = format!("{:#x}", crate::acl_support::addr(&d) + 128);
    a.ok(&format!("write {d} 1 64"));
    a.ok(&format!("write {d} 5 64 128"));
    let f = a.fail(&format!(
        "ab-copy 3 h2d 0 {d} 4096 h0 64 {d} 4096 h0 0 {d128} 4032 h0 64"
    ));
    assert_eq!(idx(&f), "1");
    assert_eq!(
        a.fail(&format!("check {d} 1 64")).code,
        -2,
        "descriptor 0 copied"
    );
    a.ok(&format!("check {d} 5 64 128"));
    a.ok(&format!("free {d}"));

    a.exit();
    root.assert_clean();
}
