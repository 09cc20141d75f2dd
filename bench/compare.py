#!/usr/bin/env python3
"""Puts kiln_bench_cuda's and torch_bench.py's JSON side by side (bench/compare_cuda.sh).

Usage: python3 bench/compare.py KILN.json TORCH.json

kiln ms is host clock around run_on_device (which synchronizes); eager and torch.compile ms
are CUDA events, with torch.compile's host-clock-plus-synchronize time in brackets. The ratio
kiln/compile divides kiln's time by torch.compile's synchronized time (the same measurement);
below 1 kiln is faster.
"""
import json
import sys


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    with open(argv[1]) as f:
        kiln = json.load(f)
    with open(argv[2]) as f:
        torch_rows = json.load(f)
    trow = {r["id"]: r for r in torch_rows.get("rows", [])}
    ids = [r["id"] for r in kiln.get("rows", [])]
    ids += [i for i in trow if i not in ids]
    krow = {r["id"]: r for r in kiln.get("rows", [])}

    kdev = kiln.get("device") or f"no device ({kiln.get('no_device')})"
    print(f"kiln: {kdev}; copy {fmt(kiln.get('copy_gbps'), '.0f')} GB/s; run floor {fmt(kiln.get('run_floor_ms'), '.4f')} ms")
    print(f"torch {torch_rows.get('torch')} (CUDA {torch_rows.get('cuda')}): {torch_rows.get('device')}; "
          f"copy {fmt(torch_rows.get('copy_gbps'), '.0f')} GB/s; first torch.compile of the process "
          f"{fmt(torch_rows.get('first_compile_s'), '.1f')} s (not in the rows)")
    head = (f"{'workload':<48} | {'kiln ms':>8} | {'eager ms':>8} | {'torch.compile ms (sync)':>23} | {'kiln/compile':>12} | "
            f"{'kiln % of copy':>14} | {'kiln TFLOP/s':>12} | {'kiln cold compile s':>19} | {'torch.compile compile s':>23} | {'kiln check':>10}")
    print()
    print(head)
    print("-" * len(head))
    for i in ids:
        k, t = krow.get(i, {}), trow.get(i, {})
        name = k.get("name") or t.get("name") or i
        kms, ems, cms, csync = k.get("kiln_ms"), t.get("eager_ms"), t.get("compile_ms"), t.get("compile_sync_ms")
        ratio = kms / csync if kms is not None and csync else None
        pct = k.get("copy_pct")
        cold = k.get("cold_compile_ms")
        comp = f"{fmt(cms, '.3f')} ({fmt(csync, '.3f')})"
        check = k.get("check", "-")
        print(f"{name:<48} | {fmt(kms, '.3f'):>8} | {fmt(ems, '.3f'):>8} | {comp:>23} | {fmt(ratio, '.2f'):>12} | "
              f"{(fmt(pct, '.0f') + '%') if pct is not None else '-':>14} | {fmt(k.get('tflops'), '.2f'):>12} | "
              f"{fmt(cold / 1e3 if cold is not None else None, '.2f'):>19} | "
              f"{fmt(t.get('compile_s'), '.1f'):>23} | {check:>10}")
    for i in ids:
        for src, r in (("kiln", krow.get(i, {})), ("torch", trow.get(i, {}))):
            for key in ("error", "eager_error", "compile_error"):
                if r.get(key):
                    print(f"{i} ({src} {key.replace('_error', '') if key != 'error' else ''}): {r[key]}".replace(" )", ")"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
