#!/usr/bin/env python3
"""kiln beside PyTorch eager and torch.compile, on the GPU and on the CPU of one machine, in one call.

For the GPU (--device cuda or all, where PyTorch sees one):
  1. builds kiln_bench_cuda in $BUILD (default build-gpu; configured as scripts/device-test.sh
     does: LLVM off, CUDA at /usr/local/cuda, .devdeps/include) unless --kiln-cuda names one;
  2. runs it: each workload compiled (cold and warm) and timed, checked against kiln's reference
     interpreter, its full-size inputs and outputs written as .npy (--npy);
  3. runs bench/torch_bench.py: PyTorch eager and torch.compile on the same workloads and shapes,
     a fresh Inductor cache for the cold compile;
  4. runs bench/npy_check.py: kiln's outputs against PyTorch eager's on kiln's inputs;
  5. prints the table.
For the CPU (--device cpu or all): the same with kiln_bench_cpu (its first dims divided by 8) at
each of --threads (KILN_NUM_THREADS beside torch.set_num_threads), the .npy check at the most
threads, then the table at the most threads and time against threads. kiln_bench_cpu is
--kiln-cpu, else .devcpu/kiln_bench_cpu (packed with ../shared/scripts/device-cpu-pack.sh and
carried to the GPU machine, which has no LLVM), else build/bench/kiln_bench_cpu.

Usage: python3 bench/compare_torch.py [--device all|cuda|cpu] [--threads 1,2,4,8,16] [--quick]
                                      [--only ID,ID] [--no-block] [--out DIR] [--reuse] [--keep-npy]
Every program's output and JSON go to --out (default: a new folder under /tmp); the tables last.
The .npy folders are deleted after their check unless --keep-npy. With --reuse, a program whose
JSON is already in --out is not run again: a sweep too long for one sitting can be split
(--threads 16, then --threads 1,2,4,8,16 --reuse). The sweep's runs below the most threads share
one Inductor cache and skip kiln's interpreter check: only their times are reported.
The columns:
  kiln ms (sync)     kiln_bench_*, median: CUDA events (the device time of a run), and in brackets
                     the host clock around a call that synchronizes (the CPU: host clock only)
  eager ms           PyTorch eager, CUDA events (the CPU: host clock)
  compile ms (sync)  torch.compile, CUDA events, and in brackets host clock + synchronize
  kiln/compile       kiln's events over torch.compile's events, and in brackets sync over sync
  % of copy          kiln's GB/s (inputs read once, outputs written once) over a copy measured in
                     the same run: device to device on the GPU, all threads on the CPU
  cold compile s     empty caches: kiln's kernel cache, a fresh Inductor/Triton cache; each
                     process's first compile (NVRTC's or Inductor's start) kept out
  check              kiln against its reference interpreter (a smaller shape)
  vs torch           kiln's outputs against PyTorch eager's on the same inputs (bench/npy_check.py)
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["all", "cuda", "cpu"], default="all")
    p.add_argument("--threads", default="1,2,4,8,16", help="CPU thread counts (default 1,2,4,8,16)")
    p.add_argument("--quick", action="store_true", help="fewer repetitions")
    p.add_argument("--only", default="", metavar="ID,ID", help="only these workloads")
    p.add_argument("--no-block", action="store_true", help="skip the GPT-2 block rows")
    p.add_argument("--out", help="output folder (default: a new one under /tmp)")
    p.add_argument("--kiln-cuda", help="a built kiln_bench_cuda (default: build it in $BUILD)")
    p.add_argument("--kiln-cpu", help="a built kiln_bench_cpu")
    p.add_argument("--reuse", action="store_true",
                   help="keep the results already in --out (a sweep split over several calls)")
    p.add_argument("--keep-npy", action="store_true", help="keep the .npy folders (gigabytes at full size)")
    return p.parse_args()


REUSE = False


def run(cmd, log, env=None, show_tail=12, result=None):
    """Runs `cmd`, its output into `log`; prints the command, its status and the log's tail.
    With --reuse, a `result` file already there stands for the run."""
    if REUSE and result and os.path.isfile(result):
        print(f"$ {' '.join(cmd)}  -> reused {result}", flush=True)
        return 0
    t0 = time.time()
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    print(f"$ {' '.join(cmd)}  -> rc {rc}, {time.time() - t0:.0f} s, log {log}", flush=True)
    with open(log) as f:
        lines = f.read().splitlines()
    for line in lines[-show_tail:] if show_tail else []:
        print("    " + line)
    return rc


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def table(kiln, torch_rows, npy, title):
    """One row per workload: kiln beside eager and torch.compile."""
    trow = {r["id"]: r for r in torch_rows.get("rows", [])}
    krow = {r["id"]: r for r in kiln.get("rows", [])}
    nrow = npy.get("rows", {})
    ids = list(krow) + [i for i in trow if i not in krow]
    print(f"\n== {title}")
    print(f"kiln: {kiln.get('device') or kiln.get('no_device') or '-'}; copy {fmt(kiln.get('copy_gbps'), '.0f')} GB/s"
          + (f"; run floor {kiln['run_floor_ms']:.4f} ms" if kiln.get("run_floor_ms") else "")
          + (f"; {kiln['threads']} threads" if kiln.get("threads") else ""))
    print(f"torch {torch_rows.get('torch')} ({torch_rows.get('device')}): copy {fmt(torch_rows.get('copy_gbps'), '.0f')} GB/s; "
          f"first torch.compile of the process {fmt(torch_rows.get('first_compile_s'), '.1f')} s (not in the rows)")
    head = (f"{'workload':<48} | {'kiln ms (sync)':>17} | {'eager ms':>8} | {'torch.compile ms (sync)':>23} | {'kiln/compile':>12} | "
            f"{'% of copy':>9} | {'TFLOP/s':>7} | {'kiln cold s':>11} | {'torch cold s':>12} | {'check':>5} | {'vs torch':>14}")
    print(head)
    print("-" * len(head))
    for i in ids:
        k, t, n = krow.get(i, {}), trow.get(i, {}), nrow.get(i, {})
        name = k.get("name") or t.get("name") or i
        kms, ksync, cms, csync = k.get("kiln_ms"), k.get("kiln_sync_ms"), t.get("compile_ms"), t.get("compile_sync_ms")
        ratio = fmt(kms / cms if kms is not None and cms else None, ".2f")
        if ksync is not None and csync:
            ratio += f" ({ksync / csync:.2f})"
        kcol = fmt(kms, ".3f") + (f" ({ksync:.3f})" if ksync is not None else "")
        pct = k.get("copy_pct")
        cold = k.get("cold_compile_ms")
        comp = f"{fmt(cms, '.3f')} ({fmt(csync, '.3f')})"
        vs = f"{n['max_rel_err']:.1e} {n['check']}" if "max_rel_err" in n else n.get("check", "-")
        print(f"{name:<48} | {kcol:>17} | {fmt(t.get('eager_ms'), '.3f'):>8} | {comp:>23} | {ratio:>12} | "
              f"{(fmt(pct, '.0f') + '%') if pct is not None else '-':>9} | {fmt(k.get('tflops'), '.2f'):>7} | "
              f"{fmt(cold / 1e3 if cold is not None else None, '.2f'):>11} | {fmt(t.get('compile_s'), '.1f'):>12} | "
              f"{k.get('check', '-'):>5} | {vs:>14}")
    for i in ids:
        for src, r in (("kiln", krow.get(i, {})), ("torch", trow.get(i, {})), ("vs torch", nrow.get(i, {}))):
            for key in ("error", "eager_error", "compile_error"):
                if r.get(key):
                    print(f"{i} ({src}{' ' + key[:-6] if key != 'error' else ''}): {r[key]}")
        if krow.get(i, {}).get("rotated_copies", 1) > 1 or trow.get(i, {}).get("rotated_copies", 1) > 1:
            print(f"{i}: inputs rotated over {krow.get(i, {}).get('rotated_copies', 1)} copies (kiln), "
                  f"{trow.get(i, {}).get('rotated_copies', 1)} (torch)")


def thread_table(runs):
    """Time against threads: kiln and torch.compile at each count, speed-up fewest -> most."""
    ids = []
    for _, k, t in runs:
        for r in k.get("rows", []) + t.get("rows", []):
            if r["id"] not in ids:
                ids.append(r["id"])
    threads = [n for n, _, _ in runs]
    print("\n== time against threads (ms): kiln_bench_cpu and torch.compile (host clock); x: fewest -> most threads")
    head = f"{'workload':<48} | " + " | ".join(f"{'kiln ' + str(n):>9}" for n in threads) + " | " + \
        " | ".join(f"{'torch ' + str(n):>9}" for n in threads) + f" | {'kiln x':>6} | {'torch x':>7}"
    print(head)
    print("-" * len(head))
    for i in ids:
        ks = [next((r.get("kiln_ms") for r in k.get("rows", []) if r["id"] == i), None) for _, k, _ in runs]
        ts = [next((r.get("compile_sync_ms") for r in t.get("rows", []) if r["id"] == i), None) for _, _, t in runs]
        name = next((r["name"] for _, k, t in runs for r in k.get("rows", []) + t.get("rows", []) if r["id"] == i), i)
        kx = ks[0] / ks[-1] if ks[0] and ks[-1] else None
        tx = ts[0] / ts[-1] if ts[0] and ts[-1] else None
        print(f"{name:<48} | " + " | ".join(f"{fmt(v, '.2f'):>9}" for v in ks) + " | " +
              " | ".join(f"{fmt(v, '.2f'):>9}" for v in ts) + f" | {fmt(kx, '.2f'):>6} | {fmt(tx, '.2f'):>7}")


def common_flags(a):
    f = []
    if a.quick:
        f.append("--quick")
    if a.only:
        f += ["--only", a.only]
    if a.no_block:
        f.append("--no-block")
    return f


def build_cuda_bench(out):
    build = os.environ.get("BUILD", "build-gpu")
    bdir = os.path.join(ROOT, build)
    if not glob.glob(os.path.join(bdir, "build.ninja")) and not glob.glob(os.path.join(bdir, "Makefile")):
        rc = run(["cmake", "-S", ".", "-B", build, "-G", "Ninja", "-DKILN_ENABLE_LLVM=OFF", "-DKILN_CUDA_ROOT=/usr/local/cuda",
                  f"-DKILN_EXTRA_INCLUDE={ROOT}/.devdeps/include"], os.path.join(out, "cmake.log"))
        if rc:
            return None
    rc = run(["cmake", "--build", build, "-j", str(os.cpu_count() or 2), "--target", "kiln_bench_cuda"],
             os.path.join(out, "build.log"), show_tail=0)
    return None if rc else os.path.join(bdir, "bench", "kiln_bench_cuda")


def compare_cuda(a, out):
    kbin = a.kiln_cuda or build_cuda_bench(out)
    if not kbin:
        print("cuda: kiln_bench_cuda did not build (see build.log)")
        return 1
    npy = os.path.join(out, "npy-cuda")
    rc = run([kbin, "--json", f"{out}/kiln_cuda.json", "--npy", npy] + common_flags(a), f"{out}/kiln_cuda.txt",
             result=f"{out}/kiln_cuda.json")
    rc |= run([sys.executable, f"{BENCH}/torch_bench.py", "--json", f"{out}/torch_cuda.json"] + common_flags(a),
              f"{out}/torch_cuda.txt", show_tail=3, result=f"{out}/torch_cuda.json")
    rc |= run([sys.executable, f"{BENCH}/npy_check.py", npy, "--device", "cuda", "--json", f"{out}/npy_cuda.json"],
              f"{out}/npy_cuda.txt", show_tail=20, result=f"{out}/npy_cuda.json")
    drop_npy(a, npy)
    table(load(f"{out}/kiln_cuda.json"), load(f"{out}/torch_cuda.json"), load(f"{out}/npy_cuda.json"), "the GPU")
    return rc


def drop_npy(a, npy):
    if not a.keep_npy:
        shutil.rmtree(npy, ignore_errors=True)


def openblas_core():
    """OpenBLAS's CPU detection does not know every model (the GPU machine's VM CPU gets its
    generic "Prescott" kernels, 2-3x slower: bench/NOTES.md): name the core from the CPU's flags
    unless the caller did. PyTorch uses its own BLAS (MKL/oneDNN) and is not affected."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return os.environ["OPENBLAS_CORETYPE"]
    try:
        flags = set(re.search(r"^flags\s*:(.*)$", open("/proc/cpuinfo").read(), re.M).group(1).split())
    except (OSError, AttributeError):
        return None
    for flag, core in (("avx512_bf16", "Cooperlake"), ("avx512f", "SkylakeX"), ("avx2", "Haswell")):
        if flag in flags:
            return core
    return None


def cpu_bench_binary(a, env):
    if a.kiln_cpu:
        return a.kiln_cpu
    packed = os.path.join(ROOT, ".devcpu")
    if os.access(os.path.join(packed, "kiln_bench_cpu"), os.X_OK):
        if os.path.isfile(os.path.join(packed, "libs.tar.xz")) and not os.path.isdir(os.path.join(packed, "lib")):
            subprocess.check_call(["tar", "xJf", "libs.tar.xz"], cwd=packed)
        env["LD_LIBRARY_PATH"] = os.path.join(packed, "lib") + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        return os.path.join(packed, "kiln_bench_cpu")
    built = os.path.join(ROOT, "build", "bench", "kiln_bench_cpu")
    return built if os.access(built, os.X_OK) else None


def compare_cpu(a, out):
    env = dict(os.environ)
    kbin = cpu_bench_binary(a, env)
    if not kbin:
        print("cpu: no kiln_bench_cpu (--kiln-cpu, .devcpu/kiln_bench_cpu or build/bench/kiln_bench_cpu)")
        return 1
    core = openblas_core()
    if core:
        env["OPENBLAS_CORETYPE"] = core
    print(f"cpu: {kbin}; OPENBLAS_CORETYPE={core or 'unset, OpenBLAS detects the core'}", flush=True)
    threads = [int(t) for t in a.threads.split(",") if t]
    npy = os.path.join(out, "npy-cpu")
    rc, runs = 0, []
    for n in threads:
        env["KILN_NUM_THREADS"] = str(n)
        last = n == threads[-1]
        # The table's run (the most threads) writes the .npy and compiles with a fresh Inductor
        # cache; the others only time, and share a cache (their compile times are not reported).
        extra = ["--npy", npy] if last else ["--no-check"]
        rc |= run([kbin, "--json", f"{out}/kiln_cpu_{n}.json"] + extra + common_flags(a), f"{out}/kiln_cpu_{n}.txt", env=env,
                  show_tail=3, result=f"{out}/kiln_cpu_{n}.json")
        extra = [] if last else ["--cache-dir", f"{out}/inductor-cpu-sweep"]
        rc |= run([sys.executable, f"{BENCH}/torch_bench.py", "--device", "cpu", "--threads", str(n), "--json",
                   f"{out}/torch_cpu_{n}.json"] + extra + common_flags(a), f"{out}/torch_cpu_{n}.txt", show_tail=1,
                  result=f"{out}/torch_cpu_{n}.json")
        runs.append((n, load(f"{out}/kiln_cpu_{n}.json"), load(f"{out}/torch_cpu_{n}.json")))
    rc |= run([sys.executable, f"{BENCH}/npy_check.py", npy, "--device", "cpu", "--json", f"{out}/npy_cpu.json"],
              f"{out}/npy_cpu.txt", show_tail=20, result=f"{out}/npy_cpu.json")
    drop_npy(a, npy)
    shutil.rmtree(f"{out}/inductor-cpu-sweep", ignore_errors=True)
    table(runs[-1][1], runs[-1][2], load(f"{out}/npy_cpu.json"), f"the CPU, {threads[-1]} threads")
    if len(runs) > 1:
        thread_table(runs)
    return rc


def main():
    global REUSE
    a = parse_args()
    REUSE = a.reuse
    # Absolute: Inductor runs its compiler from folders of its own.
    out = os.path.abspath(a.out or tempfile.mkdtemp(prefix="kiln-compare-"))
    os.makedirs(out, exist_ok=True)
    print(f"outputs in {out}", flush=True)
    rc = 0
    if a.device in ("all", "cuda"):
        rc |= compare_cuda(a, out)
    if a.device in ("all", "cpu"):
        rc |= compare_cpu(a, out)
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
