#!/usr/bin/env python3
"""Writes gpu-check's one report (report.json + report.txt) from what the steps left.

    report.py OUT_DIR

OUT_DIR holds steps.jsonl (one JSON object per step: step, status, seconds, log,
detail), conformance-*.json (devipc-conformance --json), probe.json, manifest.json (from
the bundle, if any) and the step logs. The platform-difference list
(platform-differences.txt beside this script) is applied here: a failed rule listed as
"differs" is reported as "platform-difference", one listed as "verify" stays a failure
with the reason as a note. Only the standard library: the GPU machine has no network.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

WORDING = (
    "A shim run validates devipc's code paths and cross-process IPC on real device memory "
    "under CUDA's semantics (NVIDIA GPU, CUDA runtime and driver behind the "
    "hip-over-cuda shim). It is not AMD validation: no ROCm, CLR, ROCr, libamdhip64 or AMD "
    "hardware took part. A rule that differs on CUDA is a platform difference, not a devipc bug."
)


def load_differences(path: Path) -> dict[str, tuple[str, str]]:
    """rule id -> (kind, reason) from platform-differences.txt."""
    out: dict[str, tuple[str, str]] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 3 or parts[0] not in ("differs", "verify"):
            raise SystemExit(f"{path}: bad line {line!r}")
        out[parts[1]] = (parts[0], parts[2])
    return out


def apply_differences(conf: dict, diffs: dict[str, tuple[str, str]]) -> dict:
    """Marks the rules of one devipc-conformance/1 report; recounts per backend."""
    total = {"passed": 0, "failed": 0, "skipped": 0, "platform_differences": 0}
    for backend in conf.get("backends", []):
        counts = {"passed": 0, "failed": 0, "skipped": 0, "platform_differences": 0}
        for r in backend.get("results", []):
            kind, reason = diffs.get(r["rule"], (None, None))
            r["conformance_result"] = r["result"]
            if r["result"] == "fail" and kind == "differs":
                r["result"] = "platform-difference"
                r["platform_difference"] = reason
            elif kind == "verify" and r["result"] == "fail":
                r["note"] = f"suspected platform difference (unconfirmed): {reason}"
            elif kind == "differs" and r["result"] == "pass":
                r["note"] = f"expected to differ on CUDA but passed: {reason}"
            key = {"pass": "passed", "fail": "failed", "skip": "skipped"}.get(
                r["result"], "platform_differences")
            counts[key] += 1
        backend["shim_summary"] = counts
        for k, v in counts.items():
            total[k] += v
    conf["shim_summary"] = total
    return conf


def read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return {"error": f"{path.name}: {e}"}


def main() -> int:
    out = Path(sys.argv[1])
    diffs = load_differences(HERE / "platform-differences.txt")
    steps = []
    if (out / "steps.jsonl").exists():
        steps = [json.loads(l) for l in (out / "steps.jsonl").read_text().splitlines() if l.strip()]
    conformance = {}
    for f in sorted(out.glob("conformance-*.json")):
        conformance[f.stem.removeprefix("conformance-")] = apply_differences(read_json(f), diffs)
    probe = read_json(out / "probe.json") if (out / "probe.json").exists() else {}
    manifest = read_json(out / "manifest.json") if (out / "manifest.json").exists() else {}
    shim = (out / "shim-version.txt").read_text().strip() if (out / "shim-version.txt").exists() else None
    failed_steps = [s["step"] for s in steps if s["status"] == "fail"]
    # A conformance run whose backend did not start checked nothing: a failure here.
    not_started = [f"{b.get('backend')}: {b.get('start_error') or b.get('library_error')}"
                   for c in conformance.values() for b in c.get("backends", [])
                   if not b.get("started")]
    failed_steps += [f"conformance backend did not start ({n})" for n in not_started]
    conf_failed = sum(c.get("shim_summary", {}).get("failed", 0) for c in conformance.values())
    verdict = "PASS" if not failed_steps and conf_failed == 0 and steps else "FAIL"
    report = {
        "schema": "devipc-hip-over-cuda-report/1",
        "title": "devipc HIP backend over the hip-over-cuda shim (HIP-on-NVIDIA semantics)",
        "wording": WORDING,
        "verdict": verdict,
        "shim": shim,
        "machine": probe,
        "bundle": manifest,
        "failed": failed_steps,
        "steps": steps,
        "conformance": conformance,
        "platform_differences_list": {k: {"kind": v[0], "reason": v[1]} for k, v in diffs.items()},
    }
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")

    lines = [report["title"], "=" * len(report["title"]), "", WORDING, ""]
    lines.append(f"verdict: {verdict}")
    for f in failed_steps:
        lines.append(f"  failed: {f}")
    lines.append(f"shim: {shim or '(not built)'}")
    for key in ("gpus", "driver", "cuda", "python", "torch", "kernel", "glibc"):
        if probe.get(key):
            lines.append(f"{key}: {probe[key]}")
    if manifest.get("git_commit"):
        lines.append(f"devipc: {manifest['git_commit']} (bundle built {manifest.get('built', '?')})")
    lines += ["", "steps:"]
    for s in steps:
        lines.append(f"  {s['status'].upper():5} {s['step']:<22} {s['seconds']:6.1f} s  {s.get('detail', '')}")
    for name, conf in conformance.items():
        if "error" in conf:
            lines += ["", f"conformance {name}: no report ({conf['error']})"]
            continue
        for b in conf.get("backends", []):
            c = b["shim_summary"]
            lines += ["", f"conformance {b['backend']} ({b.get('describe') or b.get('start_error')}): "
                      f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped, "
                      f"{c['platform_differences']} platform differences"]
            for r in b.get("results", []):
                if r["result"] in ("fail", "platform-difference") or r.get("note"):
                    detail = (r.get("detail") or "").splitlines()[0:1]
                    lines.append(f"  {r['result'].upper():19} {r['rule']}: {detail[0] if detail else ''}")
                    if r.get("platform_difference"):
                        lines.append(f"  {'':19} platform difference: {r['platform_difference']}")
                    if r.get("note"):
                        lines.append(f"  {'':19} {r['note']}")
    lines += ["", "Platform differences are CUDA's documented semantics, not devipc bugs; "
              "archive this report apart from AMD results."]
    (out / "report.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
