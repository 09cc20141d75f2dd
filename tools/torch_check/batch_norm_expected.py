#!/usr/bin/python3
"""Expected values of tests/frontend/test_batch_norm.cpp, from PyTorch (1.13 on the CPU, float64):
BatchNorm2d's training forward, its running statistics after two calls and its eval forward;
BatchNorm1d on [N, C] and [N, C, L]; and a small ResNet-style network (conv, BatchNorm2d, ReLU,
a residual block, adaptive average pool, linear, cross-entropy) trained three AdamW steps, and
torchvision's ResNet-18 three SGD steps: the losses, the running statistics and some
parameters after them.
Parameters follow the test's formula: parameter j (named_parameters order), element k:
0.3 sin(0.7 k + 1.3 j); input element k: 0.5 cos(0.37 k).
Run: /usr/bin/python3 tools/torch_check/batch_norm_expected.py (prints C++ initializers)."""
import math

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def set_parameters(m, scale=1.0):
    for j, (_, p) in enumerate(m.named_parameters()):
        n = p.numel()
        p.data = torch.tensor([scale * 0.3 * math.sin(0.7 * k + 1.3 * j) for k in range(n)]).reshape(p.shape)


def inp(*shape):
    n = math.prod(shape)
    return torch.tensor([0.5 * math.cos(0.37 * k) for k in range(n)]).reshape(shape)


def train(model, opt, x, t):
    """Three steps on x scaled by 1, 1.5 and 2 (the running statistics see three batches): the losses."""
    losses = []
    for step in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(model(x * (1.0 + 0.5 * step)), t)
        loss.backward()
        opt.step()
        losses.append(loss)
    return torch.stack(losses)


def show(name, t):
    vals = ", ".join(f"{v:.10g}" for v in t.detach().reshape(-1).tolist())
    print(f"// {name}: {list(t.shape)}\n{{{vals}}}")


bn = torch.nn.BatchNorm2d(3, momentum=0.2)
set_parameters(bn)
x = inp(2, 3, 4, 5)
show("bn2d train y", bn(x))
bn(x * 2.0 + 0.25)
show("bn2d running_mean", bn.running_mean)
show("bn2d running_var", bn.running_var)
bn.eval()
show("bn2d eval y", bn(x))

cumulative = torch.nn.BatchNorm2d(3, momentum=None)  # the running statistics' cumulative average
for step in range(3):
    cumulative(inp(2, 3, 4, 5) * (1.0 + step) + 0.1 * step)
show("bn2d momentum=None running_mean after 3 batches", cumulative.running_mean)
show("bn2d momentum=None running_var after 3 batches", cumulative.running_var)

b1 = torch.nn.BatchNorm1d(4)
set_parameters(b1)
show("bn1d [N,C] y", b1(inp(5, 4)))
show("bn1d [N,C,L] y", b1(inp(3, 4, 2)))
show("bn1d running_var", b1.running_var)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(4)
        self.conv2 = torch.nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 5)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)) + h)
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


net = Net()
set_parameters(net)
opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
x = inp(4, 3, 6, 6)
t = torch.tensor([0, 3, 1, 4])
show("net losses", train(net, opt, x, t))
show("net bn1.running_mean", net.bn1.running_mean)
show("net bn2.running_var", net.bn2.running_var)
show("net conv1.weight", net.conv1.weight)
show("net bn2.bias", net.bn2.bias)
show("net fc.weight", net.fc.weight)
print(f"// num_batches_tracked {int(net.bn1.num_batches_tracked)}")
net.eval()
show("net eval logits", net(x))

# torchvision's ResNet-18 (full width, 10 classes) on [4, 3, 64, 64], three SGD steps; its
# parameters at 0.2 of the formula (about torchvision's own scale: at the formula's, the
# residual sums grow to thousands and float32 keeps only a few digits of the loss).
import torchvision  # noqa: E402

# SGD with momentum, not AdamW: Adam's first steps move every weight by about lr whatever the
# size of its gradient, so weights whose gradient is float32 noise would differ by lr.
r = torchvision.models.resnet18(num_classes=10)
set_parameters(r, 0.2)
opt = torch.optim.SGD(r.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
# Batch 4 at 64x64: at batch 2 and 32x32 layer4 is 1x1, each BatchNorm there normalizes two
# values, and float32 PyTorch itself drifts from float64 by 1% in the third loss.
x = inp(4, 3, 64, 64)
t = torch.tensor([3, 7, 1, 0])
show("resnet18 losses", train(r, opt, x, t))
show("resnet18 layer4.1.bn2.running_mean[:8]", r.layer4[1].bn2.running_mean[:8])
show("resnet18 layer2.0.downsample.1.running_var[:8]", r.layer2[0].downsample[1].running_var[:8])
show("resnet18 fc.bias", r.fc.bias)
show("resnet18 layer1.0.conv1.weight[0,0]", r.layer1[0].conv1.weight[0, 0])
r.eval()
show("resnet18 eval logits", r(x))
