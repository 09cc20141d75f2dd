#!/usr/bin/env python3
"""Checks the expected gradients of tests/support/nonfinite_grads.cpp against torch.autograd.

The C++ table holds, for every derivative rule, a one-op graph fed NaN and +-inf and the
gradients PyTorch's formulas give (written out by hand). This recomputes them with PyTorch:

    KILN_NONFINITE_DUMP=/tmp/nf build/tests/kiln_tests_autograd --gtest_filter='NonfiniteRules.*'
    python3 tools/torch_check/nonfinite_grads.py /tmp/nf [--device cuda]

Each case folder holds graph.kir, in/<input>.npy, tangent/<output>.npy and
expected/<input>.npy (floating inputs). The graph is evaluated by kir_torch.py's PyTorch
mapping, except var with dim=None, which goes to torch.var(x) itself: PyTorch's var_backward
special-cases a full reduction (no dim) with dof <= 0, and the mapping's dim=(all dims) would
not reach it. Gradients come from torch.autograd.grad with the saved tangents.

NaN must sit where expected NaN sits, an infinity where the same infinity does, finite
values within 1e-9 relative + 1e-12 absolute (f64). Prints PASS/FAIL per case, then counts;
exits 1 if any failed.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kir_torch  # noqa: E402


def same(np, got, want):
    """(ok, message): NaN and infinities by position, finite values within tolerance."""
    if got.shape != want.shape:
        return False, f"shape {got.shape} != {want.shape}"
    g, w = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    for i, (a, e) in enumerate(zip(g, w)):
        if np.isnan(e) or np.isnan(a):
            ok = np.isnan(e) and np.isnan(a)
        elif np.isinf(e) or np.isinf(a):
            ok = a == e
        else:
            ok = abs(a - e) <= 1e-12 + 1e-9 * abs(e)
        if not ok:
            return False, f"element {i}: torch {a!r}, kiln expects {e!r}"
    return True, ""


def check(np, torch, F, d):
    with open(os.path.join(d, "graph.kir")) as fh:
        g = kir_torch.parse_kir(fh.read(), os.path.join(d, "graph.kir"))[0]
    inputs, wrt = {}, []
    for name, ty in g.params:
        t = kir_torch.load_input(np, torch, os.path.join(d, "in", kir_torch.file_stem(name) + ".npy"), ty)
        if t.is_floating_point():
            t.requires_grad_(True)
            wrt.append(name)
        inputs[name] = t
    node = g.nodes[0]
    if node.op == "var" and node.attrs.get("dim") is None:
        x = inputs[node.inputs[0]]
        y = torch.var(x, correction=node.attrs.get("correction", 1), keepdim=node.attrs.get("keepdim", False))
        env = dict(inputs)
        env[node.results[0]] = y
    else:
        env = kir_torch.evaluate(torch, F, g, inputs, [])
    outs, tangents = [], []
    for o in g.outputs:
        if env[o].is_floating_point():
            outs.append(env[o])
            tangents.append(torch.from_numpy(np.load(os.path.join(d, "tangent", kir_torch.file_stem(o) + ".npy"))).to(env[o]))
    grads = torch.autograd.grad(outs, [inputs[n] for n in wrt], grad_outputs=tangents, allow_unused=True)
    for name, gr in zip(wrt, grads):
        got = np.zeros(inputs[name].shape) if gr is None else gr.detach().cpu().numpy()
        ok, msg = same(np, got, np.load(os.path.join(d, "expected", kir_torch.file_stem(name) + ".npy")))
        if not ok:
            return False, f"gradient of %{name}: {msg}"
    return True, f"{len(wrt)} gradient(s)"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="the folder KILN_NONFINITE_DUMP named")
    ap.add_argument("--device", default="cpu", help="where torch evaluates (cpu or cuda)")
    opts = ap.parse_args(argv)
    import numpy as np
    import torch
    import torch.nn.functional as F
    kir_torch.DEVICE = opts.device
    passed = failed = 0
    for case in sorted(os.listdir(opts.dir)):
        d = os.path.join(opts.dir, case)
        if not os.path.isfile(os.path.join(d, "graph.kir")):
            continue
        try:
            ok, detail = check(np, torch, F, d)
        except Exception as e:  # a case torch cannot run is a failure to look at
            ok, detail = False, f"{type(e).__name__}: {e}"
        print(f"{'PASS' if ok else 'FAIL'} {case}: {detail}", flush=True)
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
