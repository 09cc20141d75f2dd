"""PyTorch mirrors of kiln's frontend/nn models: the same structure, ops and parameter paths
("blocks.0.attn.qkv.weight"), so that kiln's parameters load by path into them.

Used by grad_compare.py (gradients through kiln's interpreter) and bench/torch_bench.py (the
speed comparison and its .npy check of kiln's compiled outputs).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_sdpa(q, k, v):
    """PyTorch's scaled_dot_product_attention (2.0 and later), or the same written out (1.13)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T, S = q.shape[-2], k.shape[-2]
    s = (q @ k.transpose(-2, -1)) * (1.0 / (q.shape[-1] ** 0.5))
    keep = torch.ones(T, S, dtype=torch.bool, device=q.device).tril()
    return torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1) @ v


class MLP(nn.Module):
    """nn::MLP: Linear(d, hidden) -> exact GELU -> Linear(hidden, d); hidden 0 means 4*d."""

    def __init__(self, d, hidden=0):
        super().__init__()
        hidden = hidden or 4 * d
        self.fc = nn.Linear(d, hidden)
        self.proj = nn.Linear(hidden, d)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class ReluMLP(nn.Module):
    """bench/workloads.cpp's ReluMLP: Linear(in, hidden) -> ReLU -> Linear(hidden, classes)."""

    def __init__(self, d_in, hidden, classes):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class CausalSelfAttention(nn.Module):
    """nn::CausalSelfAttention: explicit softmax attention (matmul, masked_fill, softmax, matmul),
    the causal mask built per call as kiln's tril constant."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        B, T, C = x.shape
        H, Dh = self.heads, C // self.heads
        q, k, v = self.qkv(x).split(C, dim=2)

        def heads(t):
            return t.reshape(B, T, H, Dh).transpose(1, 2)

        q, k, v = heads(q), heads(k), heads(v)
        att = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(Dh))
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)


class Block(nn.Module):
    """nn::Block: pre-LN, h = x + attn(ln1(x)); h + mlp(ln2(h))."""

    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = MLP(d)

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        return h + self.mlp(self.ln2(h))


class MiniGPT(nn.Module):
    """nn::MiniGPT: token + position embeddings, Blocks, a final LayerNorm, an lm_head without
    bias. kiln's defaults: vocab 600, d_model 64, 4 heads, 2 layers, context 32."""

    def __init__(self, vocab=600, d=64, heads=4, layers=2, context=32):
        super().__init__()
        self.vocab = vocab
        self.tok_emb = nn.Embedding(vocab, d)
        self.pos_emb = nn.Embedding(context, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        T = tokens.shape[1]
        x = self.tok_emb(tokens) + self.pos_emb(torch.arange(T, device=tokens.device))
        for b in self.blocks:
            x = b(x)
        return self.lm_head(self.ln_f(x))

    def loss(self, tokens, targets):
        """nn::MiniGPT::loss: mean cross-entropy of the logits against the targets."""
        return F.cross_entropy(self(tokens).reshape(-1, self.vocab), targets.reshape(-1))
