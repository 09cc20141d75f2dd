#!/usr/bin/env python3
"""Compares kiln's gradients with PyTorch's on the same model, weights and inputs.

For each model (mlp, block = one MiniGPT transformer block, minigpt) and dtype (f64, f32):
  1. `kiln export MODEL --dtype D --out W/model.kir --save-inputs W/in` traces kiln's own model
     with a cross-entropy loss and writes its example inputs and initial parameters as .npy;
  2. `kiln run` gives kiln's loss, `kiln grad --save-grads` its gradients (reference interpreter);
  3. the same architecture, written below in PyTorch, loads the same .npy weights by name
     (kiln names graph inputs after module paths with '.' -> '_'), computes the loss and
     backpropagates;
  4. loss and every parameter gradient are compared: max abs and max rel error.

    grad_compare.py --kiln build/bin/kiln [--work DIR] [--models mlp,block,minigpt] [--dtypes f64,f32]

Prints one line per parameter, then a table of the largest differences per model and dtype;
exits 1 if any exceeds its tolerance (f64: 1e-9 relative to the gradient's scale, f32: 1e-4).
"""
import argparse
import math
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kiln_models import MLP, Block, MiniGPT  # noqa: E402

SIZES = dict(batch=2, seq=8, d_model=32, heads=4, vocab=50, layers=2)


# ----------------------------------------------------------------------------- the models
# Mirrors of frontend/nn (kiln_models.py): same structure, same parameter paths.

def torch_loss(model_name, s):
    """The module and a function (module, inputs by name) -> loss, as kiln export traces them."""
    if model_name == "mlp":
        m = MLP(s["d_model"])
        return m, lambda m, a: F.cross_entropy(m(a["x"]), a["targets"])
    if model_name == "block":
        m = Block(s["d_model"], s["heads"])
        B, T, C = s["batch"], s["seq"], s["d_model"]
        return m, lambda m, a: F.cross_entropy(m(a["x"]).reshape(B * T, C), a["targets"])
    m = MiniGPT(s["vocab"], s["d_model"], s["heads"], s["layers"], s["seq"])
    V = s["vocab"]
    return m, lambda m, a: F.cross_entropy(m(a["tokens"]).reshape(-1, V), a["targets"].reshape(-1))


# ----------------------------------------------------------------------------- helpers

def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def graph_signature(kir_path):
    """[(input name, type)] and [output names] of the file's graph."""
    text = open(kir_path).read()
    header = text[text.index("graph "):text.index("{")]
    inputs = re.findall(r"%([A-Za-z0-9_.]+)\s*:\s*([a-z0-9]+\[[^\]]*\](?:\{[^}]*\})?)", header)
    ret = re.search(r"return\s*\(([^)]*)\)", text).group(1)
    outputs = [v.strip().lstrip("%") for v in ret.split(",") if v.strip()]
    return inputs, outputs


def stem(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def compare(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return math.inf, math.inf
    diff = np.abs(a - b)
    scale = max(np.abs(b).max(initial=0.0), 1e-30)
    return float(diff.max(initial=0.0)), float(diff.max(initial=0.0) / scale)


# ----------------------------------------------------------------------------- main

def check(kiln, work, model_name, dtype):
    w = os.path.join(work, f"{model_name}_{dtype}")
    os.makedirs(w, exist_ok=True)
    kir = os.path.join(w, "model.kir")
    s = SIZES
    run([kiln, "export", model_name, "--dtype", dtype, "--out", kir, "--save-inputs", os.path.join(w, "in"),
         "--batch", str(s["batch"]), "--seq", str(s["seq"]), "--d-model", str(s["d_model"]),
         "--heads", str(s["heads"]), "--vocab", str(s["vocab"]), "--layers", str(s["layers"])])
    inputs, outputs = graph_signature(kir)
    files = [os.path.join(w, "in", stem(n) + ".npy") for n, _ in inputs]
    run([kiln, "run", kir, "--inputs", ",".join(files), "--save-outputs", os.path.join(w, "out")])
    run([kiln, "grad", kir, "--inputs", ",".join(files), "--save-grads", os.path.join(w, "grads")])
    kiln_loss = np.load(os.path.join(w, "out", stem(outputs[0]) + ".npy"))

    tdtype = torch.float64 if dtype == "f64" else torch.float32
    torch.manual_seed(0)
    module, loss_fn = torch_loss(model_name, s)
    module = module.to(tdtype)
    values = {n: np.load(f) for (n, _), f in zip(inputs, files)}
    params = dict(module.named_parameters())
    by_input = {p.replace(".", "_"): p for p in params}
    missing = [n for n in by_input if n not in values]
    if missing:
        sys.exit(f"{model_name}: kiln's graph has no input for PyTorch parameters {missing}")
    with torch.no_grad():
        for n, p in by_input.items():
            params[p].copy_(torch.from_numpy(values[n]).to(tdtype))
    data = {n: torch.from_numpy(v) for n, v in values.items() if n not in by_input}
    data = {n: (t.long() if not t.is_floating_point() else t.to(tdtype)) for n, t in data.items()}
    loss = loss_fn(module, data)
    loss.backward()

    rows = []
    la, lr = compare(kiln_loss, loss.detach().numpy())
    rows.append(("loss", tuple(loss.shape), la, lr))
    for n, p in by_input.items():
        g = np.load(os.path.join(w, "grads", "grad_" + stem(n) + ".npy"))
        a, r = compare(g, params[p].grad.numpy())
        rows.append((n, tuple(params[p].shape), a, r))
    return float(loss.detach()), rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--work", default="/tmp/grad_compare")
    ap.add_argument("--models", default="mlp,block,minigpt")
    ap.add_argument("--dtypes", default="f64,f32")
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    tol = {"f64": 1e-9, "f32": 1e-4}
    summary, failed = [], False
    for dtype in args.dtypes.split(","):
        for model_name in args.models.split(","):
            loss, rows = check(args.kiln, args.work, model_name, dtype)
            for n, shape, a, r in rows:
                print(f"{model_name:8} {dtype} {n:32} {str(list(shape)):14} max_abs {a:.3e} max_rel {r:.3e}")
            worst = max(rows, key=lambda x: x[3])
            ok = worst[3] <= tol[dtype]
            failed |= not ok
            summary.append((model_name, dtype, loss, len(rows) - 1, max(x[2] for x in rows), worst[3], worst[0], ok))
    print()
    print(f"{'model':8} {'dtype':5} {'loss':>12} {'grads':>5} {'max abs':>10} {'max rel':>10}  worst            result")
    for m, d, loss, n, a, r, wn, ok in summary:
        print(f"{m:8} {d:5} {loss:12.6f} {n:5d} {a:10.3e} {r:10.3e}  {wn:16} {'PASS' if ok else 'FAIL'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
