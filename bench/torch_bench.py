#!/usr/bin/env python3
"""PyTorch's side of kiln's comparisons (bench/compare_cuda.sh, bench/compare_cpu.sh): the
workloads of bench/harness.cpp, same shapes, float32 with TF32 off, in PyTorch eager and
torch.compile (default mode). On the CPU (--device cpu) the first dimension of every workload is
divided by 8, as kiln_bench_cpu does, and both times are host-clock times.

Each workload/mode is timed two ways, median of N calls after warm-up:
  ms       CUDA events around each call (device time; launches are asynchronous)
  sync ms  host clock around each call followed by torch.cuda.synchronize() (what kiln's
           run_on_device measures: it synchronizes at its end)
torch.compile's compile time is the first call's time minus one eager call, with empty
Inductor/Triton caches (a fresh TORCHINDUCTOR_CACHE_DIR; --keep-cache uses the usual ones).
A tiny compile runs first so that Inductor's one-time start (imports, compile workers) is kept
out of the rows, as kiln_bench_cuda keeps NVRTC's start out of its rows. On the GPU, where a
workload's data inputs fit in L2 (the MLP's and the GPT-2 block's batch), the calls cycle
through copies of them covering twice the L2, as kiln_bench_cuda does.

The models are tools/torch_check/kiln_models.py's mirrors of kiln's (same structure and
parameter paths); bench/npy_check.py checks kiln's outputs against them on the same inputs.

Usage: python3 bench/torch_bench.py [--device cuda|cpu] [--threads N] [--quick] [--json FILE] [--only ID,ID]
                                    [--no-block] [--keep-cache | --cache-dir DIR]
"""
import argparse
import json
import os
import math
import statistics
import sys
import tempfile
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="where to run (default cuda)")
    p.add_argument("--threads", type=int, default=0, help="CPU: torch.set_num_threads (default: PyTorch's)")
    p.add_argument("--quick", action="store_true", help="fewer repetitions")
    p.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    p.add_argument("--only", metavar="ID,ID", default="", help="run only these workload ids")
    p.add_argument("--no-block", action="store_true", help="skip the GPT-2 block")
    p.add_argument("--no-compile", action="store_true", help="eager only")
    p.add_argument("--keep-cache", action="store_true", help="use the existing Inductor/Triton caches (warm compile)")
    p.add_argument("--cache-dir", metavar="DIR", help="use DIR as the Inductor/Triton cache, kept (warm after the first use)")
    return p.parse_args()


ARGS = parse_args()
if ARGS.cache_dir or not ARGS.keep_cache:
    _cache = ARGS.cache_dir or tempfile.mkdtemp(prefix="torch-bench-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache
    os.environ["TRITON_CACHE_DIR"] = os.path.join(_cache, "triton")

try:
    import torch  # noqa: E402
    import torch.nn.functional as F  # noqa: E402
except ImportError as _e:
    sys.exit(f"torch_bench.py: PyTorch is not importable here ({_e})")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "torch_check"))
from kiln_models import Block, Llama, MiniGPT, ReluMLP, causal_sdpa  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("highest")
try:
    # The backward workloads call a compiled backward several times (retain_graph=True), which
    # donated buffers forbid.
    import torch._functorch.config as _fcfg
    _fcfg.donated_buffer = False
except Exception:  # older or newer PyTorch without the flag
    pass

DEV = ARGS.device
CPU = DEV == "cpu"
DIV = 8 if CPU else 1  # the CPU rows: the first dimension divided by 8
F32 = 4
BF16 = 2
if CPU and ARGS.threads > 0:
    torch.set_num_threads(ARGS.threads)


def sync():
    if not CPU:
        torch.cuda.synchronize()


def uniform(*shape, requires_grad=False):
    """U(-1, 1), as kiln's random_tensor."""
    t = torch.rand(*shape, device=DEV) * 2 - 1
    return t.requires_grad_(requires_grad)


def median(xs):
    return statistics.median(xs)


def time_events(fn, reps, warmup=2):
    """CUDA events around each call (device time); on the CPU, the host clock."""
    for _ in range(warmup):
        fn()
    if CPU:
        return time_synced(fn, reps)
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return median([s.elapsed_time(e) for s, e in zip(starts, ends)])


def time_synced(fn, reps):
    sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append((time.perf_counter() - t0) * 1e3)
    return median(ts)


def copy_gbps(reps):
    n = (1 << 29) if CPU else (1 << 30)  # the CPU: 512 MiB, as kiln_bench_cpu
    a = torch.ones(n, dtype=torch.uint8, device=DEV)
    b = torch.empty_like(a)
    b.copy_(a)
    ms = time_events(lambda: b.copy_(a), reps, warmup=1)
    del a, b
    return 2.0 * n / (ms * 1e6)


def compile_fn(f):
    return torch.compile(f, dynamic=False)


def rotation_count(nbytes):
    """As kiln's bench::rotation_count: copies covering twice the L2 where `nbytes` fit in it."""
    l2 = 0 if CPU else torch.cuda.get_device_properties(0).L2_cache_size
    if nbytes <= 0 or l2 <= 0 or nbytes > l2:
        return 1
    k = -(-2 * l2 // nbytes)
    return 1 if k > 64 else k


def rotated(*tensors):
    """A function returning `tensors` or one of their copies, the next one per call."""
    k = rotation_count(sum(t.numel() * t.element_size() for t in tensors))
    sets = [tensors] + [tuple(t.clone() for t in tensors) for _ in range(k - 1)]
    at = [0]

    def next_set():
        at[0] += 1
        return sets[at[0] % k]

    next_set.copies = k
    return next_set


def with_copies(run, next_set):
    run.rotated_copies = next_set.copies
    return run


# ---- workloads: each builder(mode) returns a callable `run` (one timed call) whose first call
# compiles in mode "compile"; run() returns tensors compared between eager and compile.

def wl_pointwise(mode):
    x, w, b = uniform(16384 // DIV, 4096), uniform(4096), uniform(4096)

    def f(x, w, b):
        return F.gelu(x * w + b) * torch.sigmoid(x)

    g = compile_fn(f) if mode == "compile" else f
    nxt = rotated(x, w, b)
    return with_copies(lambda: g(*nxt()), nxt)


def wl_softmax(mode):
    x = uniform(65536 // DIV, 1024)

    def f(x):
        return torch.softmax(x, dim=-1)

    g = compile_fn(f) if mode == "compile" else f
    nxt = rotated(x)
    return with_copies(lambda: g(*nxt()), nxt)


def _ln(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def wl_layer_norm_fwd(mode):
    x, w, b = uniform(16384 // DIV, 4096), uniform(4096), uniform(4096)
    g = compile_fn(_ln) if mode == "compile" else _ln
    nxt = rotated(x, w, b)
    return with_copies(lambda: g(*nxt()), nxt)


def wl_layer_norm_bwd(mode):
    # The backward alone: the forward runs once (compiled: AOTAutograd's forward graph), each
    # timed call runs the backward graph (dx, dw, db) again from the saved tensors.
    x, w, b = uniform(16384 // DIV, 4096, requires_grad=True), uniform(4096, requires_grad=True), uniform(4096, requires_grad=True)
    gy = uniform(16384 // DIV, 4096)

    def ln(x, w, b):  # its own function: torch.compile caches per code object
        return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)

    fwd = compile_fn(ln) if mode == "compile" else ln
    y = fwd(x, w, b)

    def run():
        return torch.autograd.grad(y, (x, w, b), gy, retain_graph=True)

    return run


def wl_cross_entropy(mode):
    logits = uniform(4096 // DIV, 32000, requires_grad=True)
    targets = torch.randint(0, 32000, (4096 // DIV,), device=DEV)

    def loss_fn(l, t):
        return F.cross_entropy(l, t)

    lf = compile_fn(loss_fn) if mode == "compile" else loss_fn

    def run():
        loss = lf(logits, targets)
        (gl,) = torch.autograd.grad(loss, logits)
        return loss, gl

    return run


def wl_pointwise_transposed(mode):
    xs, w, b = uniform(4096, 16384 // DIV), uniform(4096), uniform(4096)

    def f(xs, w, b):
        x = xs.t()
        return F.gelu(x * w + b) * torch.sigmoid(x)

    g = compile_fn(f) if mode == "compile" else f
    nxt = rotated(xs, w, b)
    return with_copies(lambda: g(*nxt()), nxt)


def wl_softmax_bf16(mode):
    x = uniform(65536 // DIV, 1024).bfloat16()

    def f(x):  # its own function (as each row's): a second shape or dtype on one code object
        # would recompile it, and Dynamo then marks the dims dynamic
        return torch.softmax(x, dim=-1)

    g = compile_fn(f) if mode == "compile" else f
    nxt = rotated(x)
    return with_copies(lambda: g(*nxt()), nxt)


def wl_layer_norm_fwd_bf16(mode):
    x, w, b = uniform(16384 // DIV, 4096).bfloat16(), uniform(4096).bfloat16(), uniform(4096).bfloat16()

    def ln(x, w, b):  # its own function: torch.compile caches per code object
        return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)

    g = compile_fn(ln) if mode == "compile" else ln
    nxt = rotated(x, w, b)
    return with_copies(lambda: g(*nxt()), nxt)


def wl_softmax_vocab(mode):
    x = uniform(4096 // DIV, 50257)

    def f(x):  # its own function (see wl_softmax_bf16)
        return torch.softmax(x, dim=-1)

    g = compile_fn(f) if mode == "compile" else f
    nxt = rotated(x)
    return with_copies(lambda: g(*nxt()), nxt)


def attention_workload(head_dim, dtype, backward):
    """Causal attention over [B, 12, 1024, head_dim]: eager is PyTorch's
    scaled_dot_product_attention, held to its flash backend for 16-bit inputs on the GPU (the
    issue's yardstick; left alone, PyTorch 2.11 may pick cuDNN's attention on a Hopper GPU,
    which is not FlashAttention-2) and left to choose for f32 (flash takes no f32: the
    memory-efficient backend runs it); compile is
    torch.compile of the attention written out (matmul, scale, causal mask, softmax, matmul),
    as a model writes it (Inductor may rewrite it to sdpa itself)."""
    def wl(mode):
        B = max(8 // DIV, 1)
        q, k, v = (uniform(B, 12, 1024, head_dim).to(dtype).requires_grad_(backward) for _ in range(3))
        tangent = uniform(B, 12, 1024, head_dim).to(dtype)

        def written_out(q, k, v):
            s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
            T = q.shape[-2]
            keep = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
            return torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1) @ v

        def sdpa(q, k, v):
            if DEV == "cuda" and dtype != torch.float32:
                from torch.nn.attention import SDPBackend, sdpa_kernel
                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    return causal_sdpa(q, k, v)
            return causal_sdpa(q, k, v)

        g = compile_fn(written_out) if mode == "compile" else sdpa
        if not backward:
            return lambda: g(q, k, v)

        def run():
            y = g(q, k, v)
            return (y,) + torch.autograd.grad(y, (q, k, v), tangent)

        return run

    return wl


def train_step_runner(model, loss_fn, args, mode):
    """One AdamW training step per call (zero_grad, forward, backward, step), as the MLP row;
    under torch.compile the loss and the optimizer step are each compiled."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
    if mode == "compile":
        lf = compile_fn(loss_fn)

        @torch.compile(fullgraph=False)
        def opt_step():
            opt.step()
    else:
        lf = loss_fn
        opt_step = opt.step

    nxt = rotated(*args)

    def run():
        opt.zero_grad(set_to_none=True)
        loss = lf(*nxt())
        loss.backward()
        opt_step()
        return loss.detach()

    return with_copies(run, nxt)


def wl_mlp_train_step(mode):
    torch.manual_seed(0)
    model = ReluMLP(64, 256, 600).to(DEV)
    torch.manual_seed(1)
    x = torch.randn(65536 // DIV, 64, device=DEV)
    t = torch.randint(0, 600, (65536 // DIV,), device=DEV)
    return train_step_runner(model, lambda x, t: F.cross_entropy(model(x), t), (x, t), mode)


def inference_runner(model, x, mode):
    """One no-grad forward per call of an eval-mode model (compiled under "compile")."""
    g = compile_fn(model) if mode == "compile" else model
    nxt = rotated(x)

    def run():
        with torch.no_grad():
            return g(*nxt())

    return with_copies(run, nxt)


def wl_gpt2_block(mode):
    torch.manual_seed(0)
    return inference_runner(Block(768, 12).to(DEV).eval(), uniform(max(8 // DIV, 1), 1024, 768), mode)


def torchvision_classifier(name, mode, train):
    """torchvision's `name` (1000 classes) on a batch of 32 224x224 images (divided by DIV):
    inference in eval mode, or an AdamW training step under cross_entropy."""
    import torchvision
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)().to(DEV).train(train)
    B = max(32 // DIV, 1)
    x = uniform(B, 3, 224, 224)
    if not train:
        return inference_runner(model, x, mode)
    t = torch.randint(0, 1000, (B,), device=DEV)
    return train_step_runner(model, lambda x, t: F.cross_entropy(model(x), t), (x, t), mode)


def wl_resnet50(mode):
    return torchvision_classifier("resnet50", mode, train=False)  # cuDNN's convolutions in eager


def wl_resnet50_train_step(mode):
    return torchvision_classifier("resnet50", mode, train=True)


def wl_vit_b16(mode):
    return torchvision_classifier("vit_b_16", mode, train=False)


def wl_vit_b16_train_step(mode):
    return torchvision_classifier("vit_b_16", mode, train=True)


def wl_gpt2_small_train_step(mode):
    """GPT-2 small (12 layers, width 768, 12 heads, vocabulary 50257) as kiln's MiniGPT mirror."""
    torch.manual_seed(0)
    model = MiniGPT(50257, 768, 12, 12, 1024).to(DEV)
    B = max(8 // DIV, 1)
    tokens = torch.randint(0, 50257, (B, 1024), device=DEV)
    targets = torch.randint(0, 50257, (B, 1024), device=DEV)
    return train_step_runner(model, model.loss, (tokens, targets), mode)


LLAMA_1B = dict(vocab=32000, d=2048, layers=22, heads=32, kv_heads=4, hidden=5632, context=2048, eps=1e-5)


def wl_llama_1b_train_step_bf16(mode):
    """A Llama of 1.1B parameters (TinyLlama-1.1B's sizes) under torch.autocast(bfloat16), f32
    master weights and AdamW: Hugging Face's LlamaForCausalLM (sdpa attention) where transformers
    is installed, else kiln_models.Llama (the same computation, written out)."""
    c = LLAMA_1B
    B, T = (4, 2048) if DIV == 1 else (1, 2048 // DIV)
    torch.manual_seed(0)
    try:
        import transformers
        cfg = transformers.LlamaConfig(vocab_size=c["vocab"], hidden_size=c["d"], intermediate_size=c["hidden"],
                                       num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                                       num_key_value_heads=c["kv_heads"], max_position_embeddings=c["context"],
                                       rms_norm_eps=c["eps"], use_cache=False, tie_word_embeddings=False)
        model = transformers.LlamaForCausalLM._from_config(cfg, attn_implementation="sdpa").to(DEV)
        logits_of = lambda ids: model(input_ids=ids).logits
    except ImportError:
        model = Llama(c["vocab"], c["d"], c["layers"], c["heads"], c["kv_heads"], c["hidden"], c["context"], c["eps"]).to(DEV)
        logits_of = model
    tokens = torch.randint(0, c["vocab"], (B, T), device=DEV)
    targets = torch.randint(0, c["vocab"], (B, T), device=DEV)

    def loss(ids, t):
        with torch.autocast(device_type=DEV, dtype=torch.bfloat16):
            return F.cross_entropy(logits_of(ids).reshape(-1, c["vocab"]).float(), t.reshape(-1))

    return train_step_runner(model, loss, (tokens, targets), mode)


def wl_gpt2_block_train_step(mode):
    torch.manual_seed(0)
    block = Block(768, 12).to(DEV)
    x = uniform(max(8 // DIV, 1), 1024, 768)
    return train_step_runner(block, lambda x: block(x).pow(2).mean(), (x,), mode)


def wl_gpt2_block_train_step_bf16(mode):
    """The block's step with torch.autocast(bfloat16) around the loss (compiled inside it under
    torch.compile): f32 master weights, AdamW in f32, as kiln's row."""
    torch.manual_seed(0)
    block = Block(768, 12).to(DEV)
    x = uniform(max(8 // DIV, 1), 1024, 768)

    def loss(x):
        with torch.autocast(device_type=DEV, dtype=torch.bfloat16):
            return block(x).pow(2).mean()

    return train_step_runner(block, loss, (x,), mode)


def wl_minigpt_train_step(mode):
    torch.manual_seed(0)
    model = MiniGPT().to(DEV)
    B = max(64 // DIV, 1)
    tokens = torch.randint(0, 600, (B, 32), device=DEV)
    targets = torch.randint(0, 600, (B, 32), device=DEV)

    return train_step_runner(model, model.loss, (tokens, targets), mode)


R, C, SM, CE, MB, BB = 16384 // DIV, 4096, 65536 // DIV, 4096 // DIV, 65536 // DIV, max(8 // DIV, 1)
WORKLOADS = [
    # id, name, builder, minimum traffic in bytes (inputs read once, outputs written once; None:
    # matmul-bound), as kiln's benchmarks count it; names as bench/harness.cpp gives them
    ("pointwise", f"pointwise gelu(x*w+b)*sigmoid(x) [{R},4096]", wl_pointwise, (2 * R * C + 2 * C) * F32),
    ("softmax", f"softmax [{SM},1024]", wl_softmax, 2 * SM * 1024 * F32),
    ("layer_norm_fwd", f"layer_norm fwd [{R},4096]", wl_layer_norm_fwd, (2 * R * C + 2 * C) * F32),
    # reads x, dy, w, mean, rstd; writes dx, dw, db
    ("layer_norm_bwd", f"layer_norm bwd [{R},4096]", wl_layer_norm_bwd, (3 * R * C + 3 * C + 2 * R) * F32),
    # reads logits, targets; writes loss, dlogits
    ("cross_entropy", f"cross_entropy fwd+bwd [{CE},32000]", wl_cross_entropy, 2 * CE * 32000 * F32 + CE * 8 + F32),
    ("pointwise_transposed", f"pointwise over xT [{R},4096]", wl_pointwise_transposed, (2 * R * C + 2 * C) * F32),
    ("softmax_bf16", f"softmax bf16 [{SM},1024]", wl_softmax_bf16, 2 * SM * 1024 * BF16),
    ("layer_norm_fwd_bf16", f"layer_norm fwd bf16 [{R},4096]", wl_layer_norm_fwd_bf16, (2 * R * C + 2 * C) * BF16),
    ("softmax_vocab", f"softmax [{CE},50257]", wl_softmax_vocab, 2 * CE * 50257 * F32),
] + [
    (f"attention{'_fwd_bwd' if bwd else ''}_d{hd}{'_bf16' if dt == torch.bfloat16 else ''}",
     f"attention {'fwd+bwd ' if bwd else ''}causal [{BB},12,1024,{hd}]{' bf16' if dt == torch.bfloat16 else ''}",
     attention_workload(hd, dt, bwd), None)
    for dt in (torch.float32, torch.bfloat16) for hd in (64, 128) for bwd in (False, True)
] + [
    ("mlp_train_step", f"MLP 64-256-600 train step AdamW, batch {MB}", wl_mlp_train_step, None),
    ("gpt2_block", f"GPT-2 block inference, batch {BB}, seq 1024", wl_gpt2_block, None),
    ("gpt2_block_train_step", f"GPT-2 block train step AdamW, batch {BB}, seq 1024", wl_gpt2_block_train_step, None),
    ("gpt2_block_train_step_bf16", f"GPT-2 block train step AdamW, bf16 autocast, batch {BB}, seq 1024",
     wl_gpt2_block_train_step_bf16, None),
    ("minigpt_train_step", f"MiniGPT train step AdamW, batch {max(64 // DIV, 1)}", wl_minigpt_train_step, None),
    ("resnet50", f"ResNet-50 inference, batch {max(32 // DIV, 1)}, 224x224", wl_resnet50, None),
    ("resnet50_train_step", f"ResNet-50 train step AdamW, batch {max(32 // DIV, 1)}, 224x224", wl_resnet50_train_step, None),
    ("vit_b16", f"ViT-B/16 inference, batch {max(32 // DIV, 1)}", wl_vit_b16, None),
    ("vit_b16_train_step", f"ViT-B/16 train step AdamW, batch {max(32 // DIV, 1)}", wl_vit_b16_train_step, None),
    ("gpt2_small_train_step", f"GPT-2 small train step AdamW, batch {BB}, seq 1024", wl_gpt2_small_train_step, None),
    ("llama_1b_train_step_bf16",
     f"Llama 1.1B train step AdamW, bf16 autocast, batch {4 if DIV == 1 else 1}, seq {2048 // DIV}",
     wl_llama_1b_train_step_bf16, None),
]


def flat(out):
    if isinstance(out, torch.Tensor):
        return [out.detach()]
    res = []
    for o in out:
        res += flat(o)
    return res


def max_rel_err(got, want):
    """max |got - want| over max |want| (per output, the largest over outputs), as kiln."""
    worst = 0.0
    for g, w in zip(flat(got), flat(want)):
        g, w = g.double(), w.double()
        d = (g - w).abs().max().item()
        ref = w.abs().max().item()
        worst = max(worst, d / ref if ref > 0 else d)
    return worst


def measure(wid, name, builder, traffic, reps, copy, do_compile):
    row = {"id": wid, "name": name, "traffic_bytes": traffic, "bandwidth_bound": traffic is not None}
    first = {}
    for mode in ["eager"] + (["compile"] if do_compile else []):
        try:
            sync()
            torch.manual_seed(0)  # the same inputs in both modes
            t0 = time.perf_counter()
            run = builder(mode)
            out = run()  # torch.compile compiles here (and at the first backward)
            sync()
            first_s = time.perf_counter() - t0
            first[mode] = [t.clone() for t in flat(out)]
            del out
            ms = time_events(run, reps)
            sync_ms = time_synced(run, reps)
            row["rotated_copies"] = getattr(run, "rotated_copies", 1)
            row[f"{mode}_ms"] = ms
            row[f"{mode}_sync_ms"] = sync_ms
            row[f"{mode}_first_call_s"] = first_s
            if traffic is not None:
                row[f"{mode}_gbps"] = traffic / (ms * 1e6)
                row[f"{mode}_copy_pct"] = 100.0 * traffic / (ms * 1e6) / copy
            print(f"{wid} {mode}: {ms:.3f} ms (synced {sync_ms:.3f} ms), first call {first_s:.2f} s", flush=True)
            del run
        except Exception as e:  # one broken workload must not cost the others
            msg = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            row[f"{mode}_error"] = msg
            print(f"{wid} {mode}: error: {msg}", flush=True)
        if not CPU:
            torch.cuda.empty_cache()
    if "compile_first_call_s" in row and "eager_ms" in row:
        row["compile_s"] = max(0.0, row["compile_first_call_s"] - row["eager_ms"] / 1e3)
    if "eager" in first and "compile" in first:
        row["max_rel_err"] = max_rel_err(first["compile"], first["eager"])
    first.clear()
    if not CPU:
        torch.cuda.empty_cache()
    return row


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu"


def fmt(v, spec, dash="-"):
    return dash if v is None else format(v, spec)


def main():
    if not CPU and not torch.cuda.is_available():
        print("no CUDA device: torch.cuda.is_available() is False; nothing to run")
        return 0
    reps = 5 if ARGS.quick else (20 if CPU else 30)
    only = [s for s in ARGS.only.split(",") if s]
    torch.zeros(1, device=DEV)  # CUDA context
    name = cpu_name() if CPU else torch.cuda.get_device_name(0)
    copy = copy_gbps(5 if ARGS.quick else (10 if CPU else 20))
    what = f"copy with {torch.get_num_threads()} threads" if CPU else "device-to-device copy"
    print(f"device: {name}; torch {torch.__version__}, CUDA {torch.version.cuda}; {what} {copy:.0f} GB/s (read + write)",
          flush=True)
    do_compile = not ARGS.no_compile
    warm_s = None
    if do_compile:
        t0 = time.perf_counter()
        compile_fn(lambda x: x * 2 + 1)(torch.ones(8, device=DEV))
        sync()
        warm_s = time.perf_counter() - t0
        print(f"first torch.compile of the process (tiny function, Inductor start): {warm_s:.2f} s", flush=True)

    rows = []
    for wid, wname, builder, traffic in WORKLOADS:
        if only and wid not in only:
            continue
        if ARGS.no_block and wid.startswith("gpt2_block"):
            continue
        rows.append(measure(wid, wname, builder, traffic, reps, copy, do_compile))

    if ARGS.json:
        with open(ARGS.json, "w") as f:
            json.dump({"tool": "torch_bench", "device": name, "torch": torch.__version__, "cuda": torch.version.cuda,
                       "threads": torch.get_num_threads() if CPU else None,
                       "copy_gbps": copy, "first_compile_s": warm_s, "quick": ARGS.quick, "rows": rows}, f, indent=2)

    print()
    clock = "host clock" if CPU else "CUDA events; sync: host clock + synchronize"
    print(f"machine: {name}; torch {torch.__version__}; {what} {copy:.0f} GB/s (read + write); "
          f"{reps} timed runs, median (ms: {clock})")
    head = (f"{'workload':<48} | {'mode':<7} | {'ms':>8} | {'sync ms':>8} | {'GB/s':>6} | {'% of copy':>9} | "
            f"{'kernels+BLAS':>12} | {'cold compile ms':>15} | {'warm compile ms':>15} | {'max rel err':>11}")
    print(head)
    print("-" * len(head))
    for r in rows:
        for mode in ["eager"] + (["compile"] if do_compile else []):
            ms = r.get(f"{mode}_ms")
            cold = r.get("compile_s") * 1e3 if mode == "compile" and r.get("compile_s") is not None else None
            err = r.get("max_rel_err") if mode == "compile" else None
            gb = r.get(f"{mode}_gbps")
            pct = r.get(f"{mode}_copy_pct")
            print(f"{r['name']:<48} | {mode:<7} | {fmt(ms, '.3f'):>8} | {fmt(r.get(f'{mode}_sync_ms'), '.3f'):>8} | "
                  f"{fmt(gb, '.0f'):>6} | {fmt(pct, '.0f') + ('%' if pct is not None else ''):>9} | {'-':>12} | "
                  f"{fmt(cold, '.0f'):>15} | {'-':>15} | {fmt(err, '.2g'):>11}")
    for r in rows:
        for mode in ("eager", "compile"):
            if f"{mode}_error" in r:
                print(f"{r['id']} {mode}: error: {r[f'{mode}_error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
