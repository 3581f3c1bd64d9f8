//! HIP driver-style copies (issue 25): `hipMemcpyHtoD` / `hipMemcpyDtoH`, which AMD's VMM
//! tests use to fill and read memory, are `hipMemcpy` with a fixed direction (CLR
//! `hipamd/src/hip_memory.cpp`).

use super::{CHECK, H, SIZE};
use crate::catalogue::{Step, pattern, same_bytes, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Rule, Verdict};
use crate::shell::VendorClient;

/// The driver-style copy rules.
pub(super) static RULES: &[Rule] = &[vendor(
    "hip.mem.htod-dtoh-are-directed-copies",
    H,
    "hipMemcpyHtoD and hipMemcpyDtoH copy like hipMemcpy with hipMemcpyHostToDevice / \
     hipMemcpyDeviceToHost: bytes written with one read back with the other call",
    "CLR hipamd/src/hip_memory.cpp (hipMemcpyHtoD / hipMemcpyDtoH -> ihipMemcpy on the \
     current device's null stream); hip-tests unit/memory/hipMemVmm.cc",
    Expect::Behaviour,
    &[],
    directed_copies,
)];

fn directed_copies(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    h.set_device(0).step("hipSetDevice(0)")?;
    let p = h.malloc(SIZE).step("hipMalloc")?;
    let seen = (|| {
        h.memcpy_htod(p, &pattern(7, CHECK)).step("hipMemcpyHtoD")?;
        same_bytes(
            "hipMemcpy(DeviceToHost) after hipMemcpyHtoD",
            &h.read(p, CHECK).step("hipMemcpy")?,
            &pattern(7, CHECK),
        )?;
        h.write(p + 4096, &pattern(8, CHECK)).step("hipMemcpy")?;
        same_bytes(
            "hipMemcpyDtoH after hipMemcpy(HostToDevice)",
            &h.memcpy_dtoh(p + 4096, CHECK).step("hipMemcpyDtoH")?,
            &pattern(8, CHECK),
        )?;
        Ok("hipMemcpyHtoD and hipMemcpyDtoH move the bytes hipMemcpy sees".to_owned())
    })();
    h.free(p).step("hipFree")?;
    seen
}
