#!/usr/bin/python3
"""Expected values of tests/frontend/test_rearrange_ops.cpp, from PyTorch 1.13 (CPU, float64):
pad in its four modes, flip, roll, repeat, tile, index_select, one_hot, cumsum and cumprod of
inputs by the formula of tests/support/formula_tensors.h (x[k] = 0.5 cos(0.37 k)), each
printed as the C++ initializer the test holds, with its shape.
Run: /usr/bin/python3 tools/torch_check/rearrange_expected.py"""
import math

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def formula(*shape):
    n = math.prod(shape)
    return torch.tensor([0.5 * math.cos(0.37 * k) for k in range(n)]).reshape(shape)


def show(name, y):
    vals = ", ".join(f"{v:.10g}" for v in y.reshape(-1).tolist())
    print(f"// {name}: {list(y.shape)}\n{{{vals}}}")


x = formula(2, 3, 4)
show("pad constant (1,2, 0,1) value 0.25", F.pad(x, (1, 2, 0, 1), value=0.25))
show("pad constant crop (-1,1)", F.pad(x, (-1, 1)))
show("pad reflect (2,1)", F.pad(x, (2, 1), mode="reflect"))
show("pad reflect 2d (1,2,2,1)", F.pad(x.unsqueeze(0), (1, 2, 2, 1), mode="reflect").squeeze(0))
show("pad replicate (3,1)", F.pad(x, (3, 1), mode="replicate"))
show("pad circular (2,3)", F.pad(x, (2, 3), mode="circular"))
show("flip [0,2]", torch.flip(x, [0, 2]))
show("roll 2 dim 2, -1 dim 1", torch.roll(x, (2, -1), (2, 1)))
show("roll 5 flattened", torch.roll(x, 5))
show("repeat (2,1,1,2)", x[0].repeat(2, 1, 1, 2))
show("tile (2,)", torch.tile(x, (2,)))
show("index_select dim 1 [2,0,2]", torch.index_select(x, 1, torch.tensor([2, 0, 2])))
show("one_hot [[3,0],[1,4]] 5", F.one_hot(torch.tensor([[3, 0], [1, 4]]), 5))
show("cumsum dim 2", torch.cumsum(x, 2))
show("cumsum dim 0", torch.cumsum(x, 0))
show("cumprod dim 1", torch.cumprod(x, 1))
show("cumsum of ints", torch.cumsum(torch.tensor([3, -1, 4, 1, -5, 9, 2, -6]), 0))
