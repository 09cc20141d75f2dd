#!/usr/bin/env python3
"""kiln's outputs against PyTorch eager on the same inputs, through .npy (bench/compare_torch.py).

DIR/ID holds what `kiln_bench_cuda --npy DIR` or `kiln_bench_cpu --npy DIR` wrote for workload
ID: manifest.json (a config, then every input and output with its role and module path) and one
.npy per tensor. Each workload is computed here in PyTorch eager from kiln's inputs: the
pointwise, softmax and layer-norm rows by their functions; layer-norm backward and
cross-entropy through autograd with kiln's tangents; the GPT-2 block and the training steps
with the models of tools/torch_check/kiln_models.py (ResNet-50 and ViT: torchvision's), kiln's
parameters and buffers (BatchNorm's running statistics) loaded by path, AdamW's
state (exp_avg, exp_avg_sq, step) set from kiln's inputs, then zero_grad, forward, backward and
torch.optim.AdamW's step. Every kiln output is compared with PyTorch's:
  max rel   max |kiln - torch| over max |torch|, the worst output
  verdict   pass when every element is within slack * (rtol*|torch| + atol*max|torch|), with
            f32's rtol 1.3e-6 and atol 1e-5 (torch.testing.assert_close's) and the workload's
            slack (kiln's own interpreter check uses the same); NaN must meet NaN. The ResNet-50
            training step, whose float32 result PyTorch's own float32 does not keep close to
            float64's, passes an output where kiln is within 4x PyTorch's float32 distance from
            PyTorch's float64 result (JUDGED_BY_F64).

Usage: python3 bench/npy_check.py DIR [--device cuda|cpu] [--json FILE]
Prints one line per workload and exits 1 when one fails.
"""
import argparse
import json
import os
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    sys.exit(f"npy_check.py: needs numpy and PyTorch ({e})")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "torch_check"))
from kiln_models import Block, Llama, MiniGPT, ReluMLP, causal_sdpa  # noqa: E402

RTOL, ATOL = 1.3e-6, 1e-5
SLACK = {"pointwise": 10, "softmax": 10, "layer_norm_fwd": 50, "layer_norm_bwd": 50, "cross_entropy": 10,
         "pointwise_transposed": 10, "softmax_vocab": 10,
         # bf16 outputs (written widened to f32): two bf16 roundings apart at most, 2 * 2^-8
         "softmax_bf16": 6000, "layer_norm_fwd_bf16": 6000,
         # attention: sums over 1024 keys and 64-128 dims in another order than PyTorch's kernels
         "attention_d64": 50, "attention_d128": 50, "attention_fwd_bwd_d64": 50, "attention_fwd_bwd_d128": 50,
         "attention_d64_bf16": 6000, "attention_d128_bf16": 6000, "attention_fwd_bwd_d64_bf16": 6000,
         "attention_fwd_bwd_d128_bf16": 6000,
         # bf16 autocast: kiln and PyTorch round to bf16 at other points (a fused kernel keeps f32
         # between its ops); bf16's rtol is 1.6e-2 against f32's 1.3e-6
         "gpt2_block_train_step_bf16": 1000, "llama_1b_train_step_bf16": 1000}
TRAIN_SLACK = 100  # the block, the training steps


def load(d, entries, dev):
    out = []
    for e in entries:
        a = np.load(os.path.join(d, e["file"]))
        if list(a.shape) != list(e["shape"]):
            raise ValueError(f"{e['file']}: shape {list(a.shape)}, the manifest says {e['shape']}")
        out.append(torch.from_numpy(a).to(dev))
    return out


def by_role(entries, tensors, role):
    return [t for e, t in zip(entries, tensors) if e["role"] == role]


def model_of(cfg, params):
    """The PyTorch mirror of the kiln model the manifest names, shaped from its parameters."""
    kind = cfg["model"]
    if kind == "relu_mlp":
        h, d_in = params["fc1.weight"].shape
        return ReluMLP(d_in, h, params["fc2.weight"].shape[0])
    if kind == "block":
        return Block(params["ln1.weight"].shape[0], cfg["heads"])
    if kind == "minigpt":
        return MiniGPT(cfg["vocab"], cfg["d_model"], cfg["heads"], cfg["layers"], cfg["context"])
    if kind == "llama":
        return Llama(cfg["vocab"], cfg["d_model"], cfg["layers"], cfg["heads"], cfg["kv_heads"], cfg["hidden"], cfg["context"],
                     cfg["rms_eps"])
    if kind == "resnet50":
        import torchvision
        return torchvision.models.resnet50(num_classes=params["fc.weight"].shape[0])
    if kind == "vit":
        import torchvision
        return torchvision.models.VisionTransformer(image_size=cfg["image"], patch_size=cfg["patch"], num_layers=cfg["layers"],
                                                    num_heads=cfg["heads"], hidden_dim=cfg["hidden"], mlp_dim=cfg["mlp"],
                                                    num_classes=params["heads.head.weight"].shape[0])
    raise ValueError(f"unknown model {kind!r}")


def load_params(model, params):
    named = dict(model.named_parameters())
    missing = sorted(set(named) - set(params))
    extra = sorted(set(params) - set(named))
    if missing or extra:
        raise ValueError(f"parameters differ: PyTorch's model lacks {extra}, kiln's graph lacks {missing}")
    with torch.no_grad():
        for path, p in named.items():
            if tuple(p.shape) != tuple(params[path].shape):
                raise ValueError(f"{path}: PyTorch's shape {tuple(p.shape)}, kiln's {tuple(params[path].shape)}")
            p.copy_(params[path])
    return named


def load_buffers(model, entries, tensors):
    """kiln's buffer inputs (BatchNorm's running statistics) into the model's buffers, by path."""
    named = dict(model.named_buffers())
    with torch.no_grad():
        for e, t in zip(entries, tensors):
            if e["role"] == "buffer":
                if e["path"] not in named:
                    raise ValueError(f"kiln's buffer {e['path']} is not one of PyTorch's model")
                named[e["path"]].copy_(t)
    return named


def loss_of(cfg, model, batch):
    if cfg["model"] in ("relu_mlp", "resnet50", "vit"):
        return F.cross_entropy(model(batch[0]), batch[1])
    if cfg["model"] == "block":
        return model(batch[0]).pow(2).mean()
    return model.loss(batch[0], batch[1])


def train_step(m, ins, dev):
    """One AdamW step from kiln's parameters, state and step count: loss, new params, new state
    in the order of kiln's outputs."""
    cfg, entries = m["config"], m["inputs"]
    params = {e["path"]: t for e, t in zip(entries, ins) if e["role"] == "param"}
    model = model_of(cfg, params).to(dev)
    named = load_params(model, params)
    buffers = load_buffers(model, entries, ins)
    step = float(by_role(entries, ins, "step")[0].item())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
    for e, t in zip(entries, ins):
        if e["role"] in ("exp_avg", "exp_avg_sq"):
            st = opt.state[named[e["path"]]]
            st[e["role"]] = t.clone()
            st["step"] = torch.tensor(step - 1.0)  # kiln's step counts this one; torch's increments first
    opt.zero_grad(set_to_none=True)
    if cfg.get("autocast"):  # the row traced under kiln::Autocast: torch.autocast around the loss
        with torch.autocast(device_type=dev, dtype={"bf16": torch.bfloat16, "f16": torch.float16}[cfg["autocast"]]):
            loss = loss_of(cfg, model, by_role(entries, ins, "batch"))
    else:
        loss = loss_of(cfg, model, by_role(entries, ins, "batch"))
    loss.backward()
    opt.step()
    out = []
    for e in m["outputs"]:
        if e["role"] == "loss":
            out.append(loss.detach())
        elif e["role"] == "param":
            out.append(named[e["path"]].detach())
        elif e["role"] == "buffer":  # written by the step (running statistics)
            out.append(buffers[e["path"]].detach())
        else:
            out.append(opt.state[named[e["path"]]][e["role"]])
    return out


def compute(wid, m, ins, dev):
    """PyTorch's outputs for workload `wid`, in the order of kiln's."""
    if wid == "pointwise":
        x, w, b = ins
        return [F.gelu(x * w + b) * torch.sigmoid(x)]
    if wid in ("softmax", "softmax_vocab"):
        return [torch.softmax(ins[0], -1)]
    if wid == "pointwise_transposed":
        xs, w, b = ins
        x = xs.t()
        return [F.gelu(x * w + b) * torch.sigmoid(x)]
    if wid == "softmax_bf16":
        return [torch.softmax(ins[0].bfloat16(), -1).float()]
    if wid == "layer_norm_fwd_bf16":
        x, w, b = (t.bfloat16() for t in ins)
        return [F.layer_norm(x, (x.shape[-1],), w, b, 1e-5).float()]
    if wid == "layer_norm_fwd":
        x, w, b = ins
        return [F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)]
    if wid == "layer_norm_bwd":
        x, w, b = (t.clone().requires_grad_(True) for t in by_role(m["inputs"], ins, "input"))
        (gy,) = by_role(m["inputs"], ins, "tangent")
        y = F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)
        return list(torch.autograd.grad(y, (x, w, b), gy))
    if wid == "cross_entropy":
        logits, targets, tangent = ins
        logits = logits.clone().requires_grad_(True)
        loss = F.cross_entropy(logits, targets)
        (g,) = torch.autograd.grad(loss, logits, tangent)
        return [loss.detach(), g]
    if wid.startswith("attention"):
        # q, k, v (bf16 rows widened to f32 in the files), and the tangent of fwd+bwd
        bf16 = wid.endswith("_bf16")
        q, k, v = (t.bfloat16() if bf16 else t for t in by_role(m["inputs"], ins, "input")[:3])
        if "_fwd_bwd" not in wid:
            return [causal_sdpa(q, k, v).float()]
        q, k, v = (t.clone().requires_grad_(True) for t in (q, k, v))
        tangent = ins[3].bfloat16() if bf16 else ins[3]
        y = causal_sdpa(q, k, v)
        return [t.float() for t in (y,) + torch.autograd.grad(y, (q, k, v), tangent)]
    if wid == "gpt2_block":
        params = {e["path"]: t for e, t in zip(m["inputs"], ins) if e["role"] == "param"}
        block = Block(params["ln1.weight"].shape[0], m["config"]["heads"]).to(dev)
        load_params(block, params)
        with torch.no_grad():
            return [block(by_role(m["inputs"], ins, "input")[0])]
    if wid in ("resnet50", "vit_b16"):
        params = {e["path"]: t for e, t in zip(m["inputs"], ins) if e["role"] == "param"}
        model = model_of(m["config"], params).to(dev).eval()
        load_params(model, params)
        load_buffers(model, m["inputs"], ins)
        with torch.no_grad():
            return [model(by_role(m["inputs"], ins, "input")[0])]
    if m.get("config", {}).get("model"):
        return train_step(m, ins, dev)
    raise ValueError(f"no PyTorch computation for workload {wid!r}")


# Workloads whose float32 result is itself far from float64's (a ResNet-50 training step from
# random weights: a BatchNorm bias's gradient sums a whole batch of nearly cancelling terms, and
# PyTorch's own float32 step moves some parameters 10% away from its float64 step): an output
# also passes when kiln's distance from PyTorch's float64 result is at most F64_FACTOR times
# PyTorch's float32 distance from it.
JUDGED_BY_F64 = {"resnet50_train_step"}
F64_FACTOR = 8.0  # per output; two float32 roundings of one ill-conditioned sum differ by a few times each other


def compute_f64(wid, m, ins, dev):
    """PyTorch's outputs computed in float64 from the same inputs."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return compute(wid, m, [t.double() if t.is_floating_point() else t for t in ins], dev)
    finally:
        torch.set_default_dtype(old)


def compare(wid, entries, got, want, want64=None):
    """max rel (over max |torch|) of the worst output, its name, and the verdict."""
    slack = SLACK.get(wid, TRAIN_SLACK)
    worst, worst_name, ok = 0.0, "-", True
    if len(got) != len(want):
        raise ValueError(f"kiln wrote {len(got)} outputs, PyTorch computed {len(want)}")
    for i, (e, g, w) in enumerate(zip(entries, got, want)):
        if tuple(g.shape) != tuple(w.shape):
            raise ValueError(f"{e['name']}: kiln's shape {tuple(g.shape)}, PyTorch's {tuple(w.shape)}")
        g, w = g.double(), w.detach().double().to(g.device)
        both_nan = torch.isnan(g) & torch.isnan(w)
        d = torch.where(both_nan, torch.zeros_like(g), (g - w).abs())
        d = torch.where(torch.isnan(d), torch.full_like(d, float("inf")), d)
        scale = w[torch.isfinite(w)].abs().max().item() if torch.isfinite(w).any() else 1.0
        scale = scale if scale > 0 else 1.0
        rel = d.max().item() / scale if d.numel() else 0.0
        if not bool((d <= slack * (RTOL * w.abs() + ATOL * scale)).all()):
            if want64 is None:
                ok = False
            else:
                w64 = want64[i].detach().double().to(g.device)
                ok &= (g - w64).abs().max().item() <= F64_FACTOR * (w - w64).abs().max().item() + ATOL * scale
        if rel > worst or worst_name == "-":
            worst, worst_name = rel, f"{e['role']} {e['path'] or e['name']}".strip()
    return worst, worst_name, ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results, failed = {}, False
    for wid in sorted(os.listdir(args.dir)):
        d = os.path.join(args.dir, wid)
        if not os.path.isfile(os.path.join(d, "manifest.json")):
            continue
        try:
            with open(os.path.join(d, "manifest.json")) as f:
                m = json.load(f)
            ins = load(d, m["inputs"], args.device)
            got = load(d, m["outputs"], args.device)
            torch.manual_seed(0)
            want = compute(wid, m, ins, args.device)
            want64 = compute_f64(wid, m, ins, args.device) if wid in JUDGED_BY_F64 else None
            rel, name, ok = compare(wid, m["outputs"], got, want, want64)
            results[wid] = {"check": "pass" if ok else "FAIL", "max_rel_err": rel, "worst": name, "outputs": len(got)}
            print(f"{wid}: {len(got)} outputs against PyTorch eager ({args.device}): max rel err {rel:.3g} "
                  f"(worst: {name}): {'pass' if ok else 'FAIL'}", flush=True)
        except Exception as e:  # one broken workload must not hide the others
            msg = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            results[wid] = {"check": "error", "error": msg}
            print(f"{wid}: error: {msg}", flush=True)
        failed |= results[wid]["check"] != "pass"
        if args.device == "cuda":
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tool": "npy_check", "device": args.device, "torch": torch.__version__, "rows": results}, f, indent=2)
    if not results:
        print(f"npy_check.py: no workload folders in {args.dir}")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
