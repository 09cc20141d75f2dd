#!/usr/bin/env python3
"""Runs what pack.py packed: each case compiled for a device (`kiln run --device D --check`,
which also compares every output with kiln's reference interpreter), its outputs compared with
the expected ones (ONNX's reference, or PyTorch's for torch_models.py's cases): rtol 1e-3 and
atol 1e-5 (f16/bf16: rtol 1e-2), integers and bools exact, NaN where NaN is expected.

Usage: python3 tools/onnx_check/run_pack.py --kiln build-gpu/bin/kiln PACK [--device cuda] [--jobs N]
Prints one line per failing case and a summary; exits 1 if any case fails. Needs numpy.
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys

import numpy as np


def compare(got, want, rtol=None):
    if got.shape != want.shape:
        return f"shape {got.shape} expected {want.shape}"
    if want.dtype.kind in "biu":
        bad = np.argwhere(np.atleast_1d(got.astype(np.int64) != want.astype(np.int64)))
        return "" if len(bad) == 0 else f"{len(bad)} values differ (first at {tuple(bad[0])})"
    got, want = got.astype(np.float64), want.astype(np.float64)
    rtol = rtol or (1e-2 if want.dtype == np.float16 else 1e-3)
    ok = np.isclose(got, want, rtol=rtol, atol=1e-5, equal_nan=True)
    if ok.all():
        return ""
    i = np.argwhere(~ok)[0]
    return f"{(~ok).sum()} of {ok.size} values off (at {tuple(i)}: {got[tuple(i)]} expected {want[tuple(i)]})"


def run(kiln, case, device):
    out = os.path.join(case, "got")
    ins = [os.path.join(case, "in")]
    if os.path.isdir(os.path.join(case, "weights")):
        ins.insert(0, os.path.join(case, "weights"))
    r = subprocess.run([kiln, "run", os.path.join(case, "model.kir"), "--inputs", ",".join(ins), "--device", device, "--check",
                        "--save-outputs", out], capture_output=True, text=True)
    if r.returncode != 0:
        lines = (r.stderr.strip() or r.stdout.strip()).splitlines()
        return f"kiln run failed: {lines[-1] if lines else r.returncode}"
    # --save-outputs names files by the graph's outputs, in order: match by the order run printed them.
    names = [l.split("%", 1)[1].split(":", 1)[0] for l in r.stdout.splitlines() if l.startswith("  out %")]
    for i, n in enumerate(names):
        want = os.path.join(case, "want", f"{i}.npy")
        bf16 = os.path.join(case, "want", f"{i}_bf16.npy")  # bfloat16 values as float32 (pack.py)
        if not os.path.exists(want) and not os.path.exists(bf16):
            continue
        got = np.load(os.path.join(out, n + ".npy"))
        d = compare(got, np.load(bf16), 1e-2) if os.path.exists(bf16) else compare(got, np.load(want))
        if d:
            return f"output {i} (%{n}): {d}"
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("pack")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    a = ap.parse_args()
    cases = sorted(os.path.join(a.pack, c) for c in os.listdir(a.pack) if os.path.exists(os.path.join(a.pack, c, "model.kir")))
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for case, res in zip(cases, ex.map(lambda c: run(a.kiln, c, a.device), cases)):
            if res:
                failed += 1
                print(f"FAIL {os.path.basename(case)}: {res}")
    print(f"{len(cases) - failed} of {len(cases)} cases pass on {a.device} (compiled, checked against kiln's interpreter and the expected outputs)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
