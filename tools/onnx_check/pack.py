#!/usr/bin/env python3
"""Packs ONNX test cases for a kiln that cannot import ONNX (the GPU machine's build has no
libonnx): each case that this machine's kiln imports is written as a .kir graph with its
weights, its inputs and its expected outputs as .npy files, for run_pack.py to run there.

A case is a folder in ONNX's test-data layout: model.onnx and test_data_set_0/{input,output}_N.pb
(Debian's libonnx-testdata, or what torch_models.py exports). Cases kiln refuses are listed with
the reason and left out.

Usage: python3 tools/onnx_check/pack.py --kiln build/bin/kiln OUT CASE_DIR_OR_PARENT...
Needs python3 with numpy and onnx (Debian: python3-onnx).
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np
from onnx import TensorProto, numpy_helper


KILN_DTYPES = {np.dtype(t) for t in ("float16", "float32", "float64", "int32", "int64", "bool")}


def cases_under(path):
    if os.path.exists(os.path.join(path, "model.onnx")):
        return [path]
    return sorted(os.path.join(path, d) for d in os.listdir(path) if os.path.exists(os.path.join(path, d, "model.onnx")))


def read_pb(path):
    """The tensor and whether it is bfloat16: NumPy has none, so its values come as float32
    (exact: every bfloat16 is a float32), which kiln reads for a bf16 input."""
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    a = numpy_helper.to_array(t)
    if t.data_type == TensorProto.BFLOAT16:
        return (a.astype(np.uint32) << 16).view(np.float32), True
    return a, False


def stem(name):  # tools/cli/common.cpp's file_stem
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("out")
    ap.add_argument("cases", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    packed = refused = 0
    for parent in a.cases:
        for case in cases_under(parent):
            name = os.path.basename(os.path.dirname(case.rstrip("/"))) + "__" + os.path.basename(case.rstrip("/"))
            dst = os.path.join(a.out, name)
            os.makedirs(dst, exist_ok=True)
            r = subprocess.run([a.kiln, "import", os.path.join(case, "model.onnx"), "-o", os.path.join(dst, "model.kir"),
                                "--weights", os.path.join(dst, "weights")], capture_output=True, text=True)
            if r.returncode != 0:
                refused += 1
                print(f"refused {name}: {r.stderr.strip().splitlines()[0] if r.stderr.strip() else r.returncode}")
                subprocess.run(["rm", "-rf", dst])
                continue
            # The graph's inputs in order: the model's own first, then the weights.
            header = open(os.path.join(dst, "model.kir")).readline()
            names = re.findall(r"%([A-Za-z_][A-Za-z0-9_.]*):", header)
            weights = {f[:-4] for f in os.listdir(os.path.join(dst, "weights"))} if os.path.isdir(os.path.join(dst, "weights")) else set()
            own = [n for n in names if stem(n) not in weights]
            data = os.path.join(case, "test_data_set_0")
            ins = sorted((f for f in os.listdir(data) if f.startswith("input_")), key=lambda f: int(f[6:-3]))
            outs = sorted((f for f in os.listdir(data) if f.startswith("output_")), key=lambda f: int(f[7:-3]))
            if len(ins) != len(own):
                print(f"skipped {name}: {len(ins)} inputs in its data, {len(own)} in the graph")
                subprocess.run(["rm", "-rf", dst])
                continue
            tensors = [read_pb(os.path.join(data, f))[0] for f in ins + outs]
            odd = [str(t.dtype) for t in tensors if t.dtype not in KILN_DTYPES]
            if odd:
                print(f"skipped {name}: its data holds {', '.join(sorted(set(odd)))} (kiln reads f16, bf16, f32, f64, i32, i64, bool)")
                subprocess.run(["rm", "-rf", dst])
                continue
            os.makedirs(os.path.join(dst, "in"), exist_ok=True)
            os.makedirs(os.path.join(dst, "want"), exist_ok=True)
            for n, f in zip(own, ins):
                np.save(os.path.join(dst, "in", stem(n) + ".npy"), read_pb(os.path.join(data, f))[0])
            for i, f in enumerate(outs):
                arr, bf16 = read_pb(os.path.join(data, f))
                np.save(os.path.join(dst, "want", f"{i}_bf16.npy" if bf16 else f"{i}.npy"), arr)
            packed += 1
    print(f"packed {packed} cases into {a.out}; {refused} refused by kiln import")


if __name__ == "__main__":
    sys.exit(main())
