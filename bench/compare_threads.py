#!/usr/bin/env python3
"""Time against threads, kiln's CPU backend beside torch.compile (bench/compare_cpu.sh).

Usage: python3 bench/compare_threads.py T KILN.json TORCH.json [T KILN.json TORCH.json ...]

One row per workload: kiln ms and torch.compile ms at each thread count, and each one's speed-up
from the fewest threads to the most.
"""
import json
import sys


def load(path):
    try:
        with open(path) as f:
            return {r["id"]: r for r in json.load(f).get("rows", [])}
    except (OSError, ValueError):
        return {}


def fmt(v):
    return "-" if v is None else f"{v:.2f}"


def main(argv):
    args = argv[1:]
    if len(args) < 3 or len(args) % 3:
        print(__doc__)
        return 2
    runs = sorted(((int(args[i]), load(args[i + 1]), load(args[i + 2])) for i in range(0, len(args), 3)),
                  key=lambda r: r[0])
    ids = []
    for _, k, t in runs:
        for i in list(k) + list(t):
            if i not in ids:
                ids.append(i)
    threads = [t for t, _, _ in runs]
    head = f"{'workload':<48} | " + " | ".join(f"{'kiln ' + str(t):>9}" for t in threads) + " | " + \
        " | ".join(f"{'torch ' + str(t):>9}" for t in threads) + f" | {'kiln x':>6} | {'torch x':>7}"
    print("ms per run: kiln (kiln_bench_cpu) and torch.compile, by thread count; x: fewest -> most threads")
    print(head)
    print("-" * len(head))
    for i in ids:
        name = next((k[i]["name"] for _, k, _ in runs if i in k), next((t[i]["name"] for _, _, t in runs if i in t), i))
        ks = [k.get(i, {}).get("kiln_ms") for _, k, _ in runs]
        ts = [t.get(i, {}).get("compile_sync_ms") for _, _, t in runs]
        kx = ks[0] / ks[-1] if ks[0] and ks[-1] else None
        tx = ts[0] / ts[-1] if ts[0] and ts[-1] else None
        print(f"{name:<48} | " + " | ".join(f"{fmt(v):>9}" for v in ks) + " | " + " | ".join(f"{fmt(v):>9}" for v in ts) +
              f" | {fmt(kx):>6} | {fmt(tx):>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
