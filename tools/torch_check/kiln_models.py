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


class RMSNorm(nn.Module):
    """nn::RMSNorm as Hugging Face's LlamaRMSNorm computes it: in float32 (or wider), then the
    weight in the input's dtype."""

    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        dt = x.dtype
        h = x.to(torch.promote_types(dt, torch.float32))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dt)


class RotaryEmbedding(nn.Module):
    """nn::RotaryEmbedding: cos and sin tables [context, head_dim] as buffers, applied with
    rotate_half (Hugging Face's apply_rotary_pos_emb), in the input's dtype."""

    def __init__(self, head_dim, context, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        emb = torch.outer(torch.arange(context, dtype=torch.float64), inv_freq).repeat(1, 2)
        self.register_buffer("cos", emb.cos().to(torch.get_default_dtype()))
        self.register_buffer("sin", emb.sin().to(torch.get_default_dtype()))

    def forward(self, x):
        T, half = x.shape[-2], x.shape[-1] // 2
        c, s = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        return x * c + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * s


class GroupedQueryAttention(nn.Module):
    """nn::GroupedQueryAttention: q/k/v/o projections without bias, RoPE on q and k, each key/value
    head repeated for its group of query heads (repeat_kv), causal attention."""

    def __init__(self, d, heads, kv_heads, context, base=10000.0):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, d, bias=False)
        self.rope = RotaryEmbedding(self.head_dim, context, base)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = self.rope(q), self.rope(k)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        return self.o_proj(causal_sdpa(q, k, v).transpose(1, 2).reshape(B, T, self.heads * self.head_dim))


class SwiGLU(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(d, hidden, bias=False)
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, d, heads, kv_heads, hidden, context, eps=1e-6, base=10000.0):
        super().__init__()
        self.input_norm = RMSNorm(d, eps)
        self.attn = GroupedQueryAttention(d, heads, kv_heads, context, base)
        self.post_attention_norm = RMSNorm(d, eps)
        self.mlp = SwiGLU(d, hidden)

    def forward(self, x):
        h = x + self.attn(self.input_norm(x))
        return h + self.mlp(self.post_attention_norm(h))


class Llama(nn.Module):
    """nn::LlamaForCausalLM (Hugging Face's LlamaForCausalLM without its cache, kiln's paths):
    embed_tokens, layers.N (input_norm, attn, post_attention_norm, mlp), norm, lm_head."""

    def __init__(self, vocab, d, layers, heads, kv_heads, hidden, context, eps=1e-6, base=10000.0):
        super().__init__()
        self.vocab = vocab
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([LlamaBlock(d, heads, kv_heads, hidden, context, eps, base) for _ in range(layers)])
        self.norm = RMSNorm(d, eps)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for b in self.layers:
            x = b(x)
        return self.lm_head(self.norm(x))

    def loss(self, ids, targets):
        """Mean next-token cross-entropy of the logits against the targets (in float32 under autocast)."""
        logits = self(ids).reshape(-1, self.vocab)
        return F.cross_entropy(logits.to(torch.promote_types(logits.dtype, torch.float32)), targets.reshape(-1))
