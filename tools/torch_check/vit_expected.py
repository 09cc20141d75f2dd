#!/usr/bin/python3
"""Expected values of tests/frontend/test_vit.cpp, from PyTorch 1.13 / torchvision 0.14 (CPU,
float64): a small torchvision VisionTransformer (32x32 images, 8x8 patches, 2 layers of 4 heads,
width 16, MLP 32, 5 classes), its parameters and input by the formulas of
tests/support/formula_tensors.h. Prints its parameter paths in order and its logits.
Run: /usr/bin/python3 tools/torch_check/vit_expected.py"""
import math

import torch
import torchvision

torch.set_default_dtype(torch.float64)
vit = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=16, mlp_dim=32,
                                           num_classes=5).eval()
for j, (_, p) in enumerate(vit.named_parameters()):
    p.data = torch.tensor([0.3 * math.sin(0.7 * k + 1.3 * j) for k in range(p.numel())]).reshape(p.shape)
print("// paths:", " ".join(n for n, _ in vit.named_parameters()))
x = torch.tensor([0.5 * math.cos(0.37 * k) for k in range(2 * 3 * 32 * 32)]).reshape(2, 3, 32, 32)
with torch.no_grad():
    print("{" + ", ".join(f"{v:.10g}" for v in vit(x).reshape(-1).tolist()) + "}")
