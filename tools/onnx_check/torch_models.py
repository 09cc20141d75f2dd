#!/usr/bin/env python3
"""Exports models that no one here wrote to ONNX, in ONNX's test-data layout, with PyTorch's
outputs as the expected ones: OUT/<model>/model.onnx and test_data_set_0/{input,output}_N.pb.
kiln then imports and runs them like ONNX's own test data: `kiln onnx-test OUT --device cpu|cuda`
(or pack.py and run_pack.py where the kiln that runs them cannot import ONNX).

Models: PyTorch's nn.TransformerEncoderLayer (post- and pre-norm) and nn.TransformerDecoderLayer,
nn.MultiheadAttention with a padding mask, torchvision.ops.MLP, torchvision's ResNet-18,
MobileNetV3-small, SqueezeNet 1.1 and a small VisionTransformer (random weights), a stack of
PyTorch's activation modules, an embedding-and-LayerNorm LM head, PixelShuffle, reflect/replicate
padding and F.interpolate's modes; where `transformers` is installed (the GPU machine), a 2-layer
GPT-2, BERT and Llama (grouped-query attention) from their configs (random weights). Where onnxruntime is installed, its outputs are compared with
PyTorch's and the difference printed.

Usage: python3 tools/onnx_check/torch_models.py OUT [--opset 17]
Needs torch and onnx (Debian: python3-torch, python3-onnx; /usr/bin/python3).
"""
import argparse
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper


def models():
    torch.manual_seed(0)
    nn = torch.nn
    out = {}
    out["transformer_encoder_post_norm"] = (
        nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True, activation="gelu"), (torch.randn(2, 10, 64),))
    out["transformer_encoder_pre_norm"] = (
        nn.TransformerEncoderLayer(48, 3, 96, dropout=0.0, batch_first=True, norm_first=True), (torch.randn(3, 7, 48),))
    out["transformer_decoder"] = (
        nn.TransformerDecoderLayer(32, 4, 64, dropout=0.0, batch_first=True), (torch.randn(2, 5, 32), torch.randn(2, 9, 32)))

    class MhaWithPadding(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, x, pad):
            return self.mha(x, x, x, key_padding_mask=pad, need_weights=False)[0]

    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, 4:] = True
    out["mha_key_padding"] = (MhaWithPadding(), (torch.randn(2, 6, 32), pad))
    try:
        import torchvision
        out["torchvision_mlp"] = (torchvision.ops.MLP(20, [64, 64, 10], activation_layer=nn.ReLU, dropout=0.0), (torch.randn(8, 20),))
        # CNNs (random weights, eval mode: batch norm with its running statistics).
        out["torchvision_resnet18"] = (torchvision.models.resnet18(num_classes=10), (torch.randn(2, 3, 64, 64),))
        out["torchvision_mobilenet_v3_small"] = (torchvision.models.mobilenet_v3_small(num_classes=10), (torch.randn(1, 3, 96, 96),))
        out["torchvision_squeezenet"] = (torchvision.models.squeezenet1_1(num_classes=10), (torch.randn(1, 3, 64, 64),))
        out["torchvision_vit_small"] = (torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                                                                             hidden_dim=64, mlp_dim=128, num_classes=10),
                                        (torch.randn(2, 3, 32, 32),))
        # More of torchvision's families (stop 40): squeeze-excitation (EfficientNet, RegNet),
        # channel shuffle, depthwise stacks, a segmentation head with Resize (LR-ASPP), shifted
        # windows with their masks (Swin) and ConvNeXt's layer norms over permuted channels; the
        # last two in small configurations (their full ones are 107 MB each).
        from torchvision.models.convnext import CNBlockConfig, ConvNeXt
        from torchvision.models.swin_transformer import SwinTransformer

        class SegmentationOut(nn.Module):  # the segmentation models return a dict
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                return self.inner(x)["out"]

        tv = torchvision.models
        out["torchvision_efficientnet_b0"] = (tv.efficientnet_b0(num_classes=10), (torch.randn(1, 3, 64, 64),))
        out["torchvision_regnet_y_400mf"] = (tv.regnet_y_400mf(num_classes=10), (torch.randn(1, 3, 64, 64),))
        out["torchvision_shufflenet_v2"] = (tv.shufflenet_v2_x0_5(num_classes=10), (torch.randn(1, 3, 64, 64),))
        out["torchvision_mnasnet"] = (tv.mnasnet0_5(num_classes=10), (torch.randn(1, 3, 64, 64),))
        out["torchvision_lraspp"] = (SegmentationOut(tv.segmentation.lraspp_mobilenet_v3_large(num_classes=4, weights_backbone=None)),
                                     (torch.randn(1, 3, 64, 64),))
        out["torchvision_swin_small"] = (SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                                                         window_size=[4, 4], num_classes=10), (torch.randn(1, 3, 64, 64),))
        out["torchvision_convnext_small"] = (ConvNeXt([CNBlockConfig(32, 64, 2), CNBlockConfig(64, None, 2)], num_classes=10),
                                             (torch.randn(2, 3, 64, 64),))
    except ImportError:
        pass
    out["activations"] = (nn.Sequential(nn.Linear(16, 32), nn.SiLU(), nn.Linear(32, 32), nn.Hardswish(), nn.Linear(32, 32), nn.Mish(),
                                        nn.Linear(32, 32), nn.ELU(0.5), nn.Linear(32, 32), nn.LeakyReLU(0.2), nn.Linear(32, 32),
                                        nn.Softplus(), nn.Linear(32, 32), nn.GELU(approximate="tanh"), nn.Linear(32, 32),
                                        nn.Hardsigmoid(), nn.Linear(32, 8), nn.LogSoftmax(dim=-1)), (torch.randn(5, 16),))

    class LmHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(100, 32)
            self.pos = nn.Embedding(12, 32)
            self.ln = nn.LayerNorm(32)
            self.out = nn.Linear(32, 100, bias=False)

        def forward(self, ids):
            pos = torch.arange(ids.shape[1]).unsqueeze(0)
            return torch.softmax(self.out(self.ln(self.emb(ids) + self.pos(pos))), dim=-1)

    out["lm_head"] = (LmHead(), (torch.randint(0, 100, (3, 12)),))
    out["pixel_shuffle"] = (nn.PixelShuffle(2), (torch.randn(1, 8, 3, 5),))

    class Pads(nn.Module):
        def forward(self, x):
            return torch.nn.functional.pad(x, (2, 1, 1, 2), mode="reflect") + torch.nn.functional.pad(x, (2, 1, 1, 2), mode="replicate")

    out["reflect_replicate_pad"] = (Pads(), (torch.randn(2, 3, 5, 6),))

    class Interpolations(nn.Module):
        def forward(self, x):
            f = torch.nn.functional.interpolate
            up = f(x, scale_factor=2, mode="nearest") + f(x, scale_factor=2, mode="bilinear", align_corners=False)
            up = up + f(x, size=(10, 12), mode="bilinear", align_corners=True) + f(x, scale_factor=2, mode="bicubic", align_corners=False)
            return up[:, :, :7, :5] + f(x, size=(7, 5), mode="bilinear", align_corners=False) + f(x, size=(7, 5), mode="nearest")

    out["interpolate"] = (Interpolations(), (torch.randn(2, 3, 5, 6),))
    try:
        import transformers
        g = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=500, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                                    attn_pdrop=0.0, use_cache=False)
        gpt2 = transformers.GPT2LMHeadModel(g).eval()
        out["hf_gpt2_2layer"] = (GraphOnly(gpt2, "logits"), (torch.randint(0, 500, (2, 16)),))
        b = transformers.BertConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=64, intermediate_size=128, vocab_size=500,
                                    max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        bert = transformers.BertModel(b).eval()
        out["hf_bert_2layer"] = (GraphOnly(bert, "last_hidden_state"), (torch.randint(0, 500, (2, 16)),))
        l = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                     num_key_value_heads=2, vocab_size=500, max_position_embeddings=64, use_cache=False)
        llama = transformers.LlamaForCausalLM(l).eval()
        out["hf_llama_2layer"] = (GraphOnly(llama, "logits"), (torch.randint(0, 500, (2, 16)),))
    except ImportError:
        pass
    return out


class GraphOnly(torch.nn.Module):
    """A Hugging Face model's one tensor output (their outputs are dataclasses)."""

    def __init__(self, model, field):
        super().__init__()
        self.model, self.field = model, field

    def forward(self, ids):
        # An explicit all-ones attention mask: without one, transformers looks for packed
        # sequences in the position ids with aten::diff, which the TorchScript exporter lacks.
        return getattr(self.model(input_ids=ids, attention_mask=torch.ones_like(ids)), self.field)


def export(model, args, path, opset):
    kw = dict(opset_version=opset, input_names=[f"in{i}" for i in range(len(args))], output_names=["out"])
    try:
        torch.onnx.export(model, args, path, dynamo=False, **kw)  # torch 2.x: the TorchScript exporter
    except TypeError:
        torch.onnx.export(model, args, path, **kw)  # torch 1.13
    except Exception as first:
        # What the TorchScript exporter cannot write (transformers' masks use aten::diff), torch
        # 2.x's dynamo exporter may, at the same opset; its external data is inlined.
        try:
            torch.onnx.export(model, args, path, dynamo=True, external_data=False, **kw)
        except Exception:
            raise first


def save_pb(array, path):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array).SerializeToString())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--opset", type=int, default=17)
    a = ap.parse_args()
    try:
        import onnxruntime
    except ImportError:
        onnxruntime = None
    for name, (model, args) in models().items():
        model.eval()
        d = os.path.join(a.out, name)
        os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
        with torch.no_grad():
            want = model(*args)
        try:
            export(model, args, os.path.join(d, "model.onnx"), a.opset)
        except Exception as e:  # an exporter's limit, not kiln's: say so and go on
            print(f"{name}: export failed: {type(e).__name__}: {str(e).splitlines()[0]}")
            continue
        ins = [x.numpy() for x in args]
        for i, x in enumerate(ins):
            save_pb(x, os.path.join(d, "test_data_set_0", f"input_{i}.pb"))
        save_pb(want.numpy(), os.path.join(d, "test_data_set_0", "output_0.pb"))
        ops = sorted({n.op_type for n in onnx.load(os.path.join(d, "model.onnx")).graph.node})
        line = f"{name}: {len(ops)} operators ({' '.join(ops)})"
        if onnxruntime is not None:
            try:
                s = onnxruntime.InferenceSession(os.path.join(d, "model.onnx"), providers=["CPUExecutionProvider"])
                feeds = {i.name: x for i, x in zip(s.get_inputs(), ins)}
                got = s.run(None, feeds)[0]
                line += f"; onnxruntime vs torch max |diff| {np.abs(got - want.numpy()).max():.3g}"
            except Exception as e:  # onnxruntime's limit: the model is still kiln's to run
                line += f"; onnxruntime failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
