#!/usr/bin/env python3
"""kiln's mixed-precision training against PyTorch's (issue 13), from what kiln_amp_curve wrote.

kiln_amp_curve (tools/torch_check/amp_curve.cpp) trains MiniGPT for N steps three ways from the
same weights and batches: f32, f16 autocast + GradScaler, bf16 autocast. This trains PyTorch's
mirror of the model (kiln_models.MiniGPT, kiln's initial parameters loaded by path) the same
three ways, on kiln's batches:
  f32    plain f32, TF32 off
  f16    torch.autocast(dtype=torch.float16) around the loss, torch.amp.GradScaler with kiln's
         settings (init scale, growth/backoff factors, growth interval): scale(loss).backward(),
         scaler.step(opt), scaler.update()
  bf16   torch.autocast(dtype=torch.bfloat16) around the loss, no scaler
with torch.optim.AdamW at kiln's settings, and compares each of kiln's curves with PyTorch's of
the same precision, step by step:
  max rel   max over steps of |kiln - torch| / torch
  gap       max over steps of |curve - f32 curve| / f32 curve, for kiln and for PyTorch: what the
            precision itself costs, the scale against which `max rel` is read
A curve passes when max rel <= its tolerance: f32 1e-3, f16 1e-2, bf16 3e-2 (over 50 steps of
training, where rounding differences compound). The GradScaler's final scale and skipped steps
must also agree. Reduced-precision reductions in PyTorch's f16/bf16 GEMMs are turned off, as
kiln's cuBLASLt GEMMs reduce in f32.

Usage: python3 tools/torch_check/amp_curve.py DIR [--device cuda|cpu] [--json FILE]
Exits 1 when a curve fails.
"""
import argparse
import contextlib
import json
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    sys.exit(f"amp_curve.py: needs numpy and PyTorch ({e})")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kiln_models import MiniGPT  # noqa: E402

TOLERANCE = {"f32": 1e-3, "f16": 1e-2, "bf16": 3e-2}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="what kiln_amp_curve --out wrote")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    return p.parse_args()


def torch_curve(m, d, dev, precision):
    """PyTorch's losses over kiln's batches, and the scaler's final (scale, skipped steps)."""
    cfg = m["model"]
    model = MiniGPT(cfg["vocab"], cfg["d_model"], cfg["heads"], cfg["layers"], cfg["context"]).to(dev)
    named = dict(model.named_parameters())
    if sorted(named) != sorted(m["params"]):
        raise ValueError(f"parameters differ: PyTorch's {sorted(named)}, kiln's {sorted(m['params'])}")
    with torch.no_grad():
        for path, p in named.items():
            p.copy_(torch.from_numpy(np.load(os.path.join(d, f"param.{path}.npy"))))
    o = m["optimizer"]
    opt = torch.optim.AdamW(model.parameters(), lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"],
                            weight_decay=o["weight_decay"])
    tokens = torch.from_numpy(np.load(os.path.join(d, "tokens.npy"))).to(dev)
    targets = torch.from_numpy(np.load(os.path.join(d, "targets.npy"))).to(dev)
    dtype = {"f32": None, "f16": torch.float16, "bf16": torch.bfloat16}[precision]
    scaler = None
    if precision == "f16":
        s = m["grad_scaler"]
        scaler = torch.amp.GradScaler(dev, init_scale=s["init_scale"], growth_factor=s["growth_factor"],
                                      backoff_factor=s["backoff_factor"], growth_interval=s["growth_interval"])
    losses, skipped = [], 0
    for i in range(tokens.shape[0]):
        opt.zero_grad(set_to_none=True)
        scope = torch.autocast(device_type=dev.split(":")[0], dtype=dtype) if dtype else contextlib.nullcontext()
        with scope:
            loss = model.loss(tokens[i], targets[i])
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            before = scaler.get_scale()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            skipped += scaler.get_scale() < before  # a backoff: this step found an inf or NaN
        losses.append(float(loss.detach().float().item()))
    return np.array(losses), (scaler.get_scale(), skipped) if scaler else None


def max_rel(a, b):
    return float(np.max(np.abs(a - b) / np.abs(b)))


def main():
    args = parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    with open(os.path.join(args.dir, "manifest.json")) as f:
        m = json.load(f)
    kiln = {p: np.load(os.path.join(args.dir, f"loss_{p}.npy")) for p in TOLERANCE}
    theirs, scalers = {}, {}
    for p in TOLERANCE:
        theirs[p], scalers[p] = torch_curve(m, args.dir, args.device, p)
    ok, rows = True, []
    print(f"MiniGPT, {m['steps']} AdamW steps; kiln on {m['device']}, PyTorch {torch.__version__} on {args.device}")
    print(f"{'precision':<18}{'kiln first->last':>20}{'torch first->last':>20}{'max rel':>11}{'tolerance':>11}"
          f"{'kiln gap':>10}{'torch gap':>11}  verdict")
    for p, tol in TOLERANCE.items():
        k, t = kiln[p], theirs[p]
        if k.shape != t.shape:
            raise ValueError(f"{p}: kiln has {k.shape[0]} steps, PyTorch {t.shape[0]}")
        rel = max_rel(k, t)
        passed = bool(np.all(np.isfinite(k))) and rel <= tol
        row = {"precision": p, "kiln_first": float(k[0]), "kiln_last": float(k[-1]), "torch_first": float(t[0]),
               "torch_last": float(t[-1]), "max_rel": rel, "tolerance": tol,
               "kiln_gap": max_rel(k, kiln["f32"]), "torch_gap": max_rel(t, theirs["f32"])}
        name = {"f32": "f32", "f16": "f16 + GradScaler", "bf16": "bf16"}[p]
        if p == "f16":
            ks, ts = m["f16_scaler"], scalers[p]
            row.update(kiln_scale=ks["scale"], kiln_skipped=ks["skipped_steps"], torch_scale=ts[0], torch_skipped=ts[1])
            if ks["scale"] != ts[0] or ks["skipped_steps"] != ts[1]:
                passed = False
        ok &= passed
        rows.append(dict(row, passed=passed))
        print(f"{name:<18}{k[0]:>9.4f} ->{k[-1]:>8.4f}{t[0]:>10.4f} ->{t[-1]:>8.4f}{rel:>11.2e}{tol:>11.0e}"
              f"{row['kiln_gap']:>10.2e}{row['torch_gap']:>11.2e}  {'pass' if passed else 'FAIL'}")
    s = rows[1]
    print(f"GradScaler: kiln scale {s['kiln_scale']:g}, {s['kiln_skipped']} skipped; "
          f"PyTorch scale {s['torch_scale']:g}, {s['torch_skipped']} skipped")
    print("step  " + "  ".join(f"{'kiln ' + p:>10} {'torch ' + p:>11}" for p in TOLERANCE))
    for i in range(len(kiln["f32"])):
        print(f"{i:>4}  " + "  ".join(f"{kiln[p][i]:>10.5f} {theirs[p][i]:>11.5f}" for p in TOLERANCE))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
