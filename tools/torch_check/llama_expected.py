#!/usr/bin/python3
"""Expected values of tests/frontend/test_llama_training.cpp, from PyTorch (1.13 on the CPU, float64):
a small Llama-style language model as Hugging Face's LlamaForCausalLM computes it (kiln_models.Llama:
token embedding; per block RMSNorm, q/k/v projections, rotary embeddings with rotate_half,
grouped-query heads through repeat_kv, causal softmax attention, o_proj, residual, RMSNorm,
SwiGLU, residual; a final RMSNorm and an untied head), trained three AdamW steps on a
next-token cross-entropy: the losses, some parameters after them, and the logits of the trained
model. transformers is not a Debian package, so the model is written out there, line for line
as modeling_llama.py computes it.
Parameters follow the test's formula: parameter j (named_parameters order: embed_tokens, then
per block input_norm, q, k, v, o, post_attention_norm, gate, up, down; norm; lm_head), element
k: 0.3 sin(0.7 k + 1.3 j).
Run: /usr/bin/python3 tools/torch_check/llama_expected.py (prints C++ initializers)."""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kiln_models import Llama  # noqa: E402  (kiln's paths; Hugging Face's computation)

torch.set_default_dtype(torch.float64)

VOCAB = 40


def set_parameters(m):
    for j, (_, p) in enumerate(m.named_parameters()):
        n = p.numel()
        p.data = torch.tensor([0.3 * math.sin(0.7 * k + 1.3 * j) for k in range(n)]).reshape(p.shape)


def show(name, t):
    vals = ", ".join(f"{v:.10g}" for v in t.detach().reshape(-1).tolist())
    print(f"// {name}: {list(t.shape)}\n{{{vals}}}")


B, T = 2, 8
ids = torch.tensor([(7 * k + 3) % VOCAB for k in range(B * T)]).reshape(B, T)
targets = torch.tensor([(5 * k + 1) % VOCAB for k in range(B * T)]).reshape(B, T)
model = Llama(VOCAB, d=16, layers=2, heads=4, kv_heads=2, hidden=24, context=12)
set_parameters(model)
print("// parameters: " + " ".join(n for n, _ in model.named_parameters()))
show("logits before training, first 8", model(ids).reshape(-1)[:8])
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
losses = []
for step in range(3):
    opt.zero_grad()
    loss = model.loss(ids, targets)
    loss.backward()
    opt.step()
    losses.append(loss)
show("losses", torch.stack(losses))
show("layers.1.attn.k_proj.weight[:8]", model.layers[1].attn.k_proj.weight.reshape(-1)[:8])
show("layers.0.mlp.down_proj.weight[:8]", model.layers[0].mlp.down_proj.weight.reshape(-1)[:8])
show("layers.0.input_norm.weight", model.layers[0].input_norm.weight)
show("embed_tokens.weight[3]", model.embed_tokens.weight[3])
show("trained logits[1, 7, :10]", model(ids)[1, 7, :10])
