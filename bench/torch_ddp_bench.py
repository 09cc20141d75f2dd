#!/usr/bin/env python3
"""PyTorch's side of the data-parallel scaling comparison (bench/ddp_scaling.sh): one rank of
`torchrun --nproc-per-node N bench/torch_ddp_bench.py ...`, the same models and batch per rank as
kiln_bench_ddp (the GPT-2 block on [8, 1024, 768], mean(block(x)^2); MiniGPT on 64 sequences of
32 tokens), AdamW, f32 with TF32 off (or under torch.autocast bf16), wrapped in DDP or FSDP
(fully_shard), eager or torch.compile. Times one training step (zero_grad, forward, backward,
optimizer step), the median of --steps after --warmup, each followed by
torch.cuda.synchronize(), as kiln_bench_ddp's runs end synchronized. Rank 0 prints one row in
kiln_bench_ddp's format.

Usage: torchrun --nproc-per-node N bench/torch_ddp_bench.py [--model block|minigpt] [--fsdp] [--bf16]
                                                            [--compile] [--steps N] [--warmup N]
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "torch_check"))
from kiln_models import Block, MiniGPT  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("highest")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["block", "minigpt"], default="block")
    p.add_argument("--fsdp", action="store_true")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    torch.manual_seed(0)
    g = torch.Generator(device=dev).manual_seed(1 + rank)
    if a.model == "block":
        net = Block(768, 12).to(dev)
        batch = (torch.rand(8, 1024, 768, device=dev, generator=g) * 2 - 1,)
        samples, name = 8, "GPT-2 block train step, batch 8 x seq 1024 a rank"
    else:
        net = MiniGPT().to(dev)
        batch = (torch.randint(0, 600, (64, 32), device=dev, generator=g), torch.randint(0, 600, (64, 32), device=dev, generator=g))
        samples, name = 64, "MiniGPT train step, batch 64 a rank"
    if a.bf16:
        name = name.replace("train step", "train step bf16")

    class Loss(torch.nn.Module):
        """The loss as the module's forward: DDP and FSDP hook the gradients of what their
        wrapper's forward ran."""

        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, *xs):
            return self.net(xs[0]).pow(2).mean() if a.model == "block" else self.net.loss(*xs)

    model = Loss(net)
    if a.fsdp:
        from torch.distributed.fsdp import fully_shard
        for sub in list(net.modules())[1:]:
            if isinstance(sub, Block):
                fully_shard(sub)
        fully_shard(model)
        wrapped = model
    else:
        wrapped = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.AdamW(wrapped.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)

    def forward(*xs):
        if a.bf16:
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                return wrapped(*xs)
        return wrapped(*xs)

    fwd = torch.compile(forward) if a.compile else forward

    def step():
        opt.zero_grad(set_to_none=True)
        loss = fwd(*batch)
        loss.backward()
        opt.step()

    times = []
    for i in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    ms = times[len(times) // 2]
    def local_bytes(t):  # FSDP's parameters and state are DTensors: this rank's shard
        t = t.to_local() if hasattr(t, "to_local") else t
        return t.numel() * t.element_size()

    kept = sum(local_bytes(p) for p in model.parameters()) + sum(
        local_bytes(s) for st in opt.state.values() for s in st.values() if torch.is_tensor(s) and s.dim() > 0)
    peak = torch.cuda.max_memory_allocated(dev)
    if rank == 0:
        mode = ("FSDP" if a.fsdp else "DDP") + (" compile" if a.compile else " eager")
        print(f"| torch | {name} | {mode} | {world} | {ms:.3f} | {samples * world / (ms / 1000):.0f} | {kept / 1e6:.1f} MB | "
              f"peak {peak / 1e6:.1f} MB | - |", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
