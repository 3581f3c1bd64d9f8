#!/usr/bin/env python3
"""gpu-check's Python step: a torch.cuda tensor exported with export_external (through
devipc.torch.share) and rebuilt in another process, on DEVIPC_BACKEND=hip over the shim.

The producer fills a CUDA tensor (torch's own cudaMalloc memory), shares it and a view of
it; the consumer (a spawned process) imports and checks every value, writes -1 into the
view, and the producer sees it. Rebuilding:

- ``devipc.torch.rebuild`` (DLPack) is tried first. devipc's HIP buffers are kDLROCM, which
  a CUDA build of torch refuses: expected, reported as a platform difference;
- then the same import as a tensor through ``__cuda_array_interface__`` over the imported
  pointer (``ImportedBuffer.ptr``), which is what the check needs: the bytes of torch's
  allocation, in another process, through devipc's HIP backend.

Prints one JSON object (the checks and their results) and exits 0 when nothing failed.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import sys
import traceback

N = 4096


class _CudaArray:
    """The minimum torch.as_tensor needs to view device memory (CUDA array interface v3)."""

    def __init__(self, ptr: int, n: int):
        self.__cuda_array_interface__ = {
            "shape": (n,), "typestr": "<f4", "data": (ptr, False), "version": 3, "strides": None,
        }


def consumer(inbox, outbox):
    try:
        import torch

        import devipc
        import devipc.torch

        torch.cuda.init()
        rt = devipc.Runtime.from_env()
        outbox.put(("pid", rt.process_id))
        desc = inbox.get(timeout=60)
        checks = {}
        try:
            tensors = devipc.torch.rebuild(rt, desc)
            checks["rebuild_dlpack"] = ("pass", f"{len(tensors)} tensors")
            del tensors
        except Exception as e:  # noqa: BLE001 - the expected platform difference
            checks["rebuild_dlpack"] = ("platform-difference",
                                        f"{type(e).__name__}: {e} (devipc's HIP memory is kDLROCM; a "
                                        "CUDA build of torch takes kDLCUDA)")
        spec = desc.tensors[0]
        buf = rt.import_buffer(desc.allocations[spec.alloc])
        whole = torch.as_tensor(_CudaArray(buf.ptr + spec.offset, N), device="cuda")
        expected = torch.arange(N, dtype=torch.float32, device="cuda") * 0.5
        wrong = int((whole != expected).sum())
        checks["rebuild_cuda_array_interface"] = (
            "pass" if wrong == 0 else "fail", f"{N} floats read in the consumer, {wrong} wrong")
        view_spec = desc.tensors[1]
        view = torch.as_tensor(_CudaArray(buf.ptr + view_spec.offset, view_spec.shape[0]), device="cuda")
        view[0] = -1.0
        torch.cuda.synchronize()
        del whole, view
        outbox.put(("checks", checks))
        assert inbox.get(timeout=60) == "bye"
        buf.close()
        outbox.put(("closed", rt.live_imports()))
    except Exception:  # noqa: BLE001 - reported to the producer
        outbox.put(("error", traceback.format_exc()))


def main() -> int:
    result = {"checks": {}}
    try:
        import torch

        import devipc
        import devipc.torch

        result["torch"] = torch.__version__
        result["torch_cuda"] = torch.version.cuda
        if not torch.cuda.is_available():
            result["checks"]["torch_cuda_available"] = ("fail", "torch.cuda.is_available() is False")
            print(json.dumps(result))
            return 1
        rt = devipc.Runtime.from_env()
        ctx = mp.get_context("spawn")
        inbox, outbox = ctx.Queue(), ctx.Queue()
        child = ctx.Process(target=consumer, args=(inbox, outbox))
        child.start()
        try:
            kind, *rest = outbox.get(timeout=120)
            if kind != "pid":
                raise RuntimeError(rest[0])
            peer = rest[0]
            t = torch.arange(N, dtype=torch.float32, device="cuda") * 0.5
            view = t[100:200]
            torch.cuda.synchronize()
            desc = devipc.torch.share(rt, [t, view], peers=[peer])
            result["checks"]["export_external"] = (
                "pass" if len(desc.allocations) == 1 else "fail",
                f"{len(desc.tensors)} tensors, {len(desc.allocations)} allocation(s) exported")
            inbox.put(desc)
            kind, payload = outbox.get(timeout=120)
            if kind != "checks":
                raise RuntimeError(payload)
            result["checks"].update(payload)
            torch.cuda.synchronize()
            seen = float(t[100])
            result["checks"]["bytes_back"] = (
                "pass" if seen == -1.0 else "fail", f"the producer reads {seen} where the consumer wrote -1")
            inbox.put("bye")
            kind, live = outbox.get(timeout=60)
            result["checks"]["consumer_closed"] = (
                "pass" if kind == "closed" and live == 0 else "fail", f"{kind} {live}")
            child.join(60)
            devipc.torch.close_external(rt, [t, view])
            result["checks"]["close_external"] = ("pass", "")
        finally:
            if child.is_alive():
                child.kill()
                child.join()
    except Exception:  # noqa: BLE001 - the report says what broke
        result["error"] = traceback.format_exc()
    print(json.dumps(result, indent=2))
    failed = [k for k, (status, _) in result["checks"].items() if status == "fail"]
    return 1 if failed or "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
