#!/usr/bin/env python3
"""Differential check of kiln's reference interpreter against PyTorch.

Parses kiln's canonical .kir text (as `kiln print` writes it), evaluates the graph with the
PyTorch op of the same semantics, and compares every output with the one kiln saved.

    kir_torch.py CASE.kir DIR [CASE.kir DIR ...]
    kir_torch.py --parse-only CASE.kir ...       # parse and print back (needs neither torch nor numpy)

DIR holds kiln's .npy files: `kiln run CASE.kir --seed S --save-inputs DIR/in --save-outputs DIR/out`
(DIR/in and DIR/out; when they are missing, DIR itself holds both). Inputs are read in the
graph's order from DIR/in/NAME.npy; bf16 inputs were saved by kiln as f32 and are converted back.

Prints one line per case: PASS / FAIL / SKIP with the max abs and rel error, then
`N passed, M failed` (skips are counted apart); exits 1 if any failed.
Only numpy and torch are needed (and only for the comparison).
"""
import argparse
import math
import os
import re
import sys

# ----------------------------------------------------------------------------- parsing

DTYPES = ("f64", "f32", "f16", "bf16", "i64", "i32", "bool")


class ParseError(Exception):
    pass


class Tok:
    __slots__ = ("kind", "text", "value", "line", "col")

    def __init__(self, kind, text, value, line, col):
        self.kind, self.text, self.value, self.line, self.col = kind, text, value, line, col

    def __repr__(self):
        return f"{self.kind}:{self.text!r}@{self.line}:{self.col}"


_PUNCT = {"(": "(", ")": ")", "{": "{", "}": "}", "[": "[", "]": "]", ",": ",", ":": ":", "=": "=", "@": "@"}
_NUM = re.compile(r"[+-]?(?:inf|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_VALUE = re.compile(r"%[A-Za-z0-9_.]+")


def tokenize(text, file="<kir>"):
    toks, i, line, col = [], 0, 1, 1
    n = len(text)

    def push(kind, t, value=None):
        if kind == "nl" and (not toks or toks[-1].kind == "nl"):
            return
        toks.append(Tok(kind, t, value, line, col))

    while i < n:
        c = text[i]
        if c == "\n":
            push("nl", "\n")
            i, line, col = i + 1, line + 1, 1
            continue
        if c in " \t\r":
            i, col = i + 1, col + 1
            continue
        if c == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c in _PUNCT:
            push(c, c)
            i, col = i + 1, col + 1
            continue
        if c == "%":
            m = _VALUE.match(text, i)
            if not m:
                raise ParseError(f"{file}:{line}:{col}: expected a value name after '%'")
            push("value", m.group()[1:])
            i, col = m.end(), col + m.end() - i
            continue
        if c == '"':
            j, s = i + 1, []
            while True:
                if j >= n or text[j] == "\n":
                    raise ParseError(f"{file}:{line}:{col}: unterminated string")
                if text[j] == '"':
                    break
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                    s.append("\n" if text[j] == "n" else text[j])
                else:
                    s.append(text[j])
                j += 1
            push("str", "".join(s), "".join(s))
            i, col = j + 1, col + j + 1 - i
            continue
        m = _NUM.match(text, i)
        if m and (c.isdigit() or c == "." or (c in "+-" and m.end() > i + 1)):
            t = m.group()
            body = t.lstrip("+-")
            if body in ("inf", "nan"):
                push("float", t, float(t))
            elif re.fullmatch(r"\d+", body):
                push("int", t, int(t))
            else:
                push("float", t, float(t))
            i, col = m.end(), col + m.end() - i
            continue
        m = _IDENT.match(text, i)
        if m:
            push("ident", m.group())
            i, col = m.end(), col + m.end() - i
            continue
        raise ParseError(f"{file}:{line}:{col}: unexpected character {c!r}")
    push("nl", "\n")
    toks.append(Tok("eof", "", None, line, col))
    return toks


class Type:
    """dtype[shape]{strides}@device, as kiln prints it (strides None: contiguous)."""

    def __init__(self, dtype, shape, strides=None, device="cpu"):
        self.dtype, self.shape, self.strides, self.device = dtype, tuple(shape), strides, device

    def contiguous_strides(self):
        st, acc = [], 1
        for d in reversed(self.shape):
            st.append(acc)
            acc *= max(d, 1)
        return tuple(reversed(st))

    def full_strides(self):
        return tuple(self.strides) if self.strides is not None else self.contiguous_strides()

    def __str__(self):
        s = f"{self.dtype}[{','.join(map(str, self.shape))}]"
        if self.strides is not None and tuple(self.strides) != self.contiguous_strides():
            s += "{" + ",".join(map(str, self.strides)) + "}"
        if self.device != "cpu":
            s += "@" + self.device
        return s


class Node:
    def __init__(self, results, op, inputs, attrs, types, line):
        self.results, self.op, self.inputs, self.attrs, self.types, self.line = results, op, inputs, attrs, types, line


class Graph:
    def __init__(self, name, params, nodes, outputs):
        self.name, self.params, self.nodes, self.outputs = name, params, nodes, outputs

    def type_of(self, name):
        for p, t in self.params:
            if p == name:
                return t
        for n in self.nodes:
            if name in n.results:
                return n.types[n.results.index(name)]
        return None

    def producer(self, name):
        for n in self.nodes:
            if name in n.results:
                return n
        return None


def format_attr(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        s = repr(v)
        if not any(ch in s for ch in ".en"):
            s += ".0"
        return s
    if isinstance(v, Dtype):
        return v.name
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, list):
        return "[" + ",".join(format_attr(x) for x in v) + "]"
    raise TypeError(v)


class Dtype:
    """A dtype name as an attribute value (kept apart from strings)."""

    def __init__(self, name):
        self.name = name

    def __eq__(self, o):
        return isinstance(o, Dtype) and o.name == self.name

    def __repr__(self):
        return self.name


class Parser:
    def __init__(self, text, file):
        self.file = file
        self.toks = tokenize(text, file)
        self.pos = 0

    def peek(self, k=0):
        return self.toks[min(self.pos + k, len(self.toks) - 1)]

    def next(self):
        t = self.peek()
        self.pos += 1
        return t

    def error(self, t, msg):
        raise ParseError(f"{self.file}:{t.line}:{t.col}: {msg}")

    def expect(self, kind, what=""):
        t = self.next()
        if t.kind != kind:
            self.error(t, f"expected {kind!r} {what}, found {t.kind} {t.text!r}")
        return t

    def accept(self, kind):
        if self.peek().kind == kind:
            return self.next()
        return None

    def skip_nl(self):
        while self.accept("nl"):
            pass

    def int_list(self, open_, close):
        self.expect(open_)
        out = []
        if self.accept(close):
            return out
        while True:
            out.append(self.expect("int", "in a list").value)
            if self.accept(close):
                return out
            self.expect(",", "in a list")

    def parse_type(self):
        t = self.expect("ident", "(a dtype)")
        if t.text not in DTYPES:
            self.error(t, f"unknown dtype {t.text!r}")
        shape = self.int_list("[", "]")
        strides = None
        if self.peek().kind == "{":
            strides = self.int_list("{", "}")
        device = "cpu"
        if self.accept("@"):
            d = self.expect("ident", "(a device)").text
            if d == "cuda":
                self.expect(":")
                d += ":" + str(self.expect("int").value)
            device = d
        return Type(t.text, shape, strides, device)

    def literal(self):
        t = self.next()
        if t.kind in ("int", "float", "str"):
            return t.value
        if t.kind == "ident":
            if t.text == "true":
                return True
            if t.text == "false":
                return False
            if t.text in ("inf", "nan"):
                return float(t.text)
            if t.text in DTYPES:
                return Dtype(t.text)
            self.error(t, f"unknown name {t.text!r} as an attribute value")
        if t.kind == "[":
            items = []
            if self.accept("]"):
                return items
            while True:
                e = self.next()
                if e.kind in ("int", "float"):
                    items.append(e.value)
                elif e.kind == "ident" and e.text in ("inf", "nan"):
                    items.append(float(e.text))
                else:
                    self.error(e, "expected a number in the list")
                if self.accept("]"):
                    break
                self.expect(",", "in the list")
            if any(isinstance(x, float) for x in items):
                items = [float(x) for x in items]
            return items
        self.error(t, f"expected an attribute value, found {t.text!r}")

    def parse_graph(self):
        kw = self.expect("ident", "('graph')")
        if kw.text != "graph":
            self.error(kw, "expected 'graph'")
        name = self.expect("ident", "(the graph's name)").text
        self.expect("(")
        params = []
        if not self.accept(")"):
            while True:
                v = self.expect("value", "(an input)")
                self.expect(":")
                params.append((v.text, self.parse_type()))
                if self.accept(")"):
                    break
                self.expect(",")
        self.expect("{")
        self.skip_nl()
        nodes, outputs = [], None
        while True:
            t = self.peek()
            if t.kind == "ident" and t.text == "return":
                self.next()
                self.expect("(")
                outputs = []
                if not self.accept(")"):
                    while True:
                        outputs.append(self.expect("value").text)
                        if self.accept(")"):
                            break
                        self.expect(",")
                self.skip_nl()
                self.expect("}")
                self.skip_nl()
                break
            nodes.append(self.parse_statement())
            self.skip_nl()
        return Graph(name, params, nodes, outputs)

    def parse_statement(self):
        first = self.peek()
        results = [self.expect("value", "(a result name)").text]
        while self.accept(","):
            results.append(self.expect("value").text)
        self.expect("=")
        op = self.expect("ident", "(an op name)").text
        self.expect("(")
        inputs, attrs = [], {}
        if not self.accept(")"):
            while True:
                t = self.peek()
                if t.kind == "value":
                    self.next()
                    inputs.append(t.text)
                elif t.kind == "ident" and self.peek(1).kind == "=":
                    self.next()
                    self.next()
                    attrs[t.text] = self.literal()
                else:
                    self.error(t, f"expected a value or an attribute, found {t.text!r}")
                if self.accept(")"):
                    break
                self.expect(",")
        types = []
        if self.accept(":"):
            types.append(self.parse_type())
            while self.accept(","):
                types.append(self.parse_type())
            if len(types) != len(results):
                self.error(first, f"{len(types)} types for {len(results)} results")
        if self.peek().kind not in ("nl", "}"):
            self.error(self.peek(), "expected the end of the statement")
        return Node(results, op, inputs, attrs, types or [None] * len(results), first.line)

    def parse_all(self):
        graphs = []
        self.skip_nl()
        while self.peek().kind != "eof":
            graphs.append(self.parse_graph())
            self.skip_nl()
        return graphs


def parse_kir(text, file="<kir>"):
    return Parser(text, file).parse_all()


def print_graph(g):
    out = "graph " + g.name + "(" + ", ".join(f"%{p}: {t}" for p, t in g.params) + ") {\n"
    for n in g.nodes:
        args = [f"%{v}" for v in n.inputs] + [f"{k}={format_attr(v)}" for k, v in n.attrs.items()]
        types = ", ".join(str(t) for t in n.types) if n.types[0] is not None else None
        lhs = ", ".join("%" + r for r in n.results)
        out += f"  {lhs} = {n.op}({', '.join(args)})" + (f" : {types}" if types else "") + "\n"
    return out + "  return (" + ", ".join("%" + o for o in g.outputs) + ")\n}\n"


def file_stem(name):
    """kiln's tools/cli/common.cpp file_stem: the .npy name of a value."""
    s = "".join(c if (c.isalnum() and c.isascii()) or c in "_.-" else "_" for c in name)
    if not s or s[0] == ".":
        s = "_" + s
    return s


# ----------------------------------------------------------------------------- evaluation

TOL = {  # (rtol, atol)
    "f64": (1e-10, 1e-10),
    "f32": (1e-5, 1e-6),
    "f16": (1e-2, 1e-2),
    "bf16": (2e-2, 2e-2),
}

VIEW_OPS = {"reshape", "permute", "transpose", "expand", "squeeze", "unsqueeze", "slice", "split"}


DEVICE = "cpu"


class Skip(Exception):
    pass


def torch_dtype(torch, name):
    return {
        "f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
        "i64": torch.int64, "i32": torch.int32, "bool": torch.bool,
    }[name]


def dtype_name(torch, dt):
    for n in DTYPES:
        if torch_dtype(torch, n) == dt:
            return n
    return str(dt)


def make_ops(torch, F):
    td = lambda v: None if v is None else torch_dtype(torch, v.name if isinstance(v, Dtype) else v)

    def per_dim(v, n):
        """kiln's one-value-or-one-per-dim int lists as torch's per-dim lists."""
        return list(v) * n if len(v) == 1 else list(v)

    def rms_norm(x, shape, w, eps):
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, shape, w, eps)
        dims = tuple(range(-len(shape), 0))
        e = torch.finfo(x.dtype).eps if eps is None else eps
        y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + e)
        return y * w if w is not None else y

    def pool(f1, f2, f3, x, a, **kw):
        """torch's max_pool/avg_pool of 1 to 3 spatial dims with kiln's attributes."""
        k = list(a["kernel_size"])
        n = len(k)
        stride = A(a, "stride", [])
        return (f1, f2, f3)[n - 1](x, k, stride=per_dim(stride, n) if stride else None, padding=per_dim(A(a, "padding", [0]), n),
                                   ceil_mode=A(a, "ceil_mode", False), **kw)

    def A(attrs, key, default=None):
        return attrs.get(key, default)

    def all_dims(x, dims):
        # kiln: dim=None (or []) reduces every dim
        if dims is None or (isinstance(dims, list) and len(dims) == 0):
            return tuple(range(x.dim()))
        return tuple(dims) if isinstance(dims, list) else (dims,)

    def reduce_sum_like(fn):
        def f(ins, a):
            x = ins[0]
            dims = all_dims(x, A(a, "dim"))
            kw = {}
            if A(a, "dtype") is not None:
                kw["dtype"] = td(a["dtype"])
            if len(dims) == 0:  # a 0-d tensor: nothing to reduce over
                return fn(x, **kw)
            return fn(x, dim=dims, keepdim=A(a, "keepdim", False), **kw)
        return f

    def amax_like(fn):
        def f(ins, a):
            x = ins[0]
            return fn(x, dim=all_dims(x, A(a, "dim")), keepdim=A(a, "keepdim", False))
        return f

    def prod(ins, a):
        x = ins[0]
        kw = {"dtype": td(a["dtype"])} if A(a, "dtype") is not None else {}
        d = A(a, "dim")
        if d is None:
            r = torch.prod(x, **kw)
            if A(a, "keepdim", False):
                r = r.reshape([1] * x.dim())
            return r
        return torch.prod(x, dim=d, keepdim=A(a, "keepdim", False), **kw)

    def argmax(ins, a):
        return torch.argmax(ins[0], dim=A(a, "dim"), keepdim=A(a, "keepdim", False))

    def var(ins, a):
        x = ins[0]
        return torch.var(x, dim=all_dims(x, A(a, "dim")), correction=A(a, "correction", 1),
                         keepdim=A(a, "keepdim", False))

    def clamp(ins, a):
        return torch.clamp(ins[0], min=A(a, "min"), max=A(a, "max"))

    def slice_(ins, a):
        x = ins[0]
        d = A(a, "dim", 0)
        idx = [slice(None)] * x.dim()
        idx[d] = slice(A(a, "start"), A(a, "end"), A(a, "step", 1))
        return x[tuple(idx)]

    def split(ins, a):
        x = ins[0]
        size = A(a, "split_size")
        sizes = A(a, "split_sizes")
        return list(torch.split(x, size if size is not None else sizes, dim=A(a, "dim", 0)))

    def squeeze(ins, a):
        d = A(a, "dim")
        x = ins[0]
        if d is None:
            return torch.squeeze(x)
        if x.dim() == 0:
            return x
        for k in sorted({k % x.dim() for k in d}, reverse=True):  # torch < 2.0 takes one dim
            x = torch.squeeze(x, k)
        return x

    def full(ins, a):
        v = a["fill_value"]
        dt = A(a, "dtype")
        if dt is None:
            dt = torch.bool if isinstance(v, bool) else torch.float32 if isinstance(v, float) else torch.int64
        else:
            dt = td(dt)
        return torch.full(tuple(a["size"]), v, dtype=dt)

    def arange(ins, a):
        kw = {"dtype": td(a["dtype"])} if A(a, "dtype") is not None else {}
        return torch.arange(A(a, "start", 0), a["end"], A(a, "step", 1), **kw)

    def constant(ins, a):
        vals = torch.tensor([float(v) for v in a["values"]], dtype=torch.float64)
        return vals.to(td(a["dtype"])).reshape(tuple(a["size"]))

    def tri(fn):
        def f(ins, a):
            diag = A(a, "diagonal", 0)
            if ins:
                return fn(ins[0], diagonal=diag)
            dt = td(A(a, "dtype")) if A(a, "dtype") is not None else torch.float32
            return fn(torch.ones(tuple(a["size"]), dtype=dt), diagonal=diag)
        return f

    def softmax(fn):
        def f(ins, a):
            kw = {"dtype": td(a["dtype"])} if A(a, "dtype") is not None else {}
            return fn(ins[0], a["dim"], **kw)
        return f

    def layer_norm(ins, a):
        x = ins[0]
        w = ins[1] if len(ins) > 1 else None
        b = ins[2] if len(ins) > 2 else None
        return F.layer_norm(x, tuple(a["normalized_shape"]), w, b, A(a, "eps", 1e-5))

    def gather(ins, a):
        return torch.gather(ins[0], a["dim"], ins[1].long())

    def scatter_add(ins, a):
        return ins[0].scatter_add(a["dim"], ins[1].long(), ins[2])

    def scatter(ins, a):
        # On the CPU whatever the device: PyTorch's CPU kernel writes in index order (the later
        # of two writes to one place stays, kiln's rule); which one its CUDA kernel keeps is
        # unspecified.
        return ins[0].cpu().scatter(a["dim"], ins[1].long().cpu(), ins[2].cpu()).to(ins[0].device)

    def scatter_reduce(ins, a):
        return ins[0].scatter_reduce(a["dim"], ins[1].long(), ins[2], a["reduce"], include_self=A(a, "include_self", True))

    def scatter_fold(ins, a):
        return ins[0].scatter_reduce(a["dim"], ins[1].long(), ins[2], a["reduce"])

    def sort(ins, a):
        # stable: equal values keep their order, kiln's rule in either direction
        r = torch.sort(ins[0], dim=A(a, "dim", -1), descending=A(a, "descending", False), stable=True)
        return [r.values, r.indices]

    def topk(ins, a):
        # PyTorch leaves the order of equal values unspecified: the cases give topk distinct ones.
        r = torch.topk(ins[0], a["k"], dim=A(a, "dim", -1), largest=A(a, "largest", True), sorted=True)
        return [r.values, r.indices]

    def einsum(ins, a):
        # Integer operands on the CPU: PyTorch's CUDA has no integer batched GEMM ("baddbmm_cuda"
        # not implemented for 'Long').
        if not ins[0].is_floating_point() and ins[0].device.type != "cpu":
            return torch.einsum(a["equation"], *[t.cpu() for t in ins]).to(ins[0].device)
        return torch.einsum(a["equation"], *ins)

    def embedding(ins, a):
        # kiln: embedding(weight, indices); padding_idx only changes gradients in PyTorch
        return F.embedding(ins[1], ins[0])

    def cross_entropy(ins, a):
        return F.cross_entropy(ins[0], ins[1], ignore_index=A(a, "ignore_index", -100),
                               reduction=A(a, "reduction", "mean"), label_smoothing=A(a, "label_smoothing", 0.0))

    def nll_loss(ins, a):
        return F.nll_loss(ins[0], ins[1], ignore_index=A(a, "ignore_index", -100), reduction=A(a, "reduction", "mean"))

    def dropout(ins, a):
        raise Skip("dropout")

    def rand(ins, a):
        # kiln's values come from its own Philox stream (ir/random.h), not torch's generator.
        raise Skip("rand: kiln's random stream is not torch's")

    def unary(fn):
        return lambda ins, a: fn(ins[0])

    def binary(fn):
        return lambda ins, a: fn(ins[0], ins[1])

    ops = {
        "neg": unary(torch.neg), "abs": unary(torch.abs), "exp": unary(torch.exp), "log": unary(torch.log),
        "log1p": unary(torch.log1p), "sqrt": unary(torch.sqrt), "rsqrt": unary(torch.rsqrt),
        "reciprocal": unary(torch.reciprocal), "sin": unary(torch.sin), "cos": unary(torch.cos),
        "tanh": unary(torch.tanh), "sigmoid": unary(torch.sigmoid), "relu": unary(torch.relu),
        "gelu": lambda ins, a: F.gelu(ins[0], approximate=A(a, "approximate", "none")),
        "silu": unary(F.silu),
        "hardsigmoid": unary(F.hardsigmoid), "hardswish": unary(F.hardswish),
        "leaky_relu": lambda ins, a: F.leaky_relu(ins[0], A(a, "negative_slope", 0.01)),
        "elu": lambda ins, a: torch.ops.aten.elu(ins[0], A(a, "alpha", 1.0), A(a, "scale", 1.0), A(a, "input_scale", 1.0)),
        "selu": unary(F.selu),
        "softplus": lambda ins, a: F.softplus(ins[0], A(a, "beta", 1.0), A(a, "threshold", 20.0)),
        "mish": unary(F.mish),
        "logsumexp": lambda ins, a: torch.logsumexp(ins[0], dim=a.get("dim") if a.get("dim") is not None else list(range(ins[0].dim())), keepdim=A(a, "keepdim", False)),
        "isnan": unary(torch.isnan), "isinf": unary(torch.isinf),
        "nan_to_num": lambda ins, a: torch.nan_to_num(ins[0], nan=A(a, "nan", 0.0), posinf=a.get("posinf"), neginf=a.get("neginf")), "square": unary(torch.square), "erf": unary(torch.erf), "sign": unary(torch.sign),
        "floor": unary(torch.floor), "ceil": unary(torch.ceil), "round": unary(torch.round), "trunc": unary(torch.trunc),
        "log2": unary(torch.log2), "exp2": unary(torch.exp2),
        "fmod": binary(torch.fmod), "remainder": binary(torch.remainder), "atan2": binary(torch.atan2),
        "logical_not": unary(torch.logical_not),
        "erfinv": unary(torch.erfinv), "bitwise_not": unary(torch.bitwise_not),
        "to": lambda ins, a: ins[0].to(td(a["dtype"])),
        "add": binary(torch.add), "sub": binary(torch.sub), "mul": binary(torch.mul), "div": binary(torch.div),
        "pow": binary(torch.pow), "maximum": binary(torch.maximum), "minimum": binary(torch.minimum),
        "eq": binary(torch.eq), "ne": binary(torch.ne), "lt": binary(torch.lt), "le": binary(torch.le),
        "gt": binary(torch.gt), "ge": binary(torch.ge),
        "logical_and": binary(torch.logical_and), "logical_or": binary(torch.logical_or),
        "bitwise_and": binary(torch.bitwise_and), "bitwise_or": binary(torch.bitwise_or), "bitwise_xor": binary(torch.bitwise_xor),
        "where": lambda ins, a: torch.where(ins[0], ins[1], ins[2]),
        "clamp": clamp,
        "masked_fill": lambda ins, a: ins[0].masked_fill(ins[1], a["value"]),
        "sum": reduce_sum_like(torch.sum), "mean": reduce_sum_like(torch.mean),
        "amax": amax_like(torch.amax), "amin": amax_like(torch.amin),
        "argmax": argmax, "var": var, "prod": prod,
        "reshape": lambda ins, a: torch.reshape(ins[0], tuple(a["shape"])),
        "permute": lambda ins, a: ins[0].permute(*a["dims"]),
        "transpose": lambda ins, a: torch.transpose(ins[0], a["dim0"], a["dim1"]),
        "expand": lambda ins, a: ins[0].expand(*a["size"]),
        "squeeze": squeeze,
        "unsqueeze": lambda ins, a: torch.unsqueeze(ins[0], a["dim"]),
        "slice": slice_,
        "cat": lambda ins, a: torch.cat(list(ins), dim=A(a, "dim", 0)),
        "split": split,
        "contiguous": lambda ins, a: ins[0].contiguous(),
        "full": full,
        "zeros": lambda ins, a: torch.zeros(tuple(a["size"]), dtype=td(A(a, "dtype", "f32"))),
        "ones": lambda ins, a: torch.ones(tuple(a["size"]), dtype=td(A(a, "dtype", "f32"))),
        "arange": arange, "constant": constant,
        "matmul": binary(torch.matmul), "bmm": binary(torch.bmm),
        "einsum": einsum,
        "linear": lambda ins, a: F.linear(ins[0], ins[1], ins[2] if len(ins) > 2 else None),
        "convolution": lambda ins, a: torch.convolution(ins[0], ins[1], ins[2] if len(ins) > 2 else None,
                                                        per_dim(A(a, "stride", [1]), ins[1].dim() - 2), per_dim(A(a, "padding", [0]), ins[1].dim() - 2),
                                                        per_dim(A(a, "dilation", [1]), ins[1].dim() - 2), A(a, "transposed", False),
                                                        per_dim(A(a, "output_padding", [0]), ins[1].dim() - 2), A(a, "groups", 1)),
        # torch 1.13 has no F.rms_norm: its formula, in the input's dtype as torch computes it
        "rms_norm": lambda ins, a: rms_norm(ins[0], list(a["normalized_shape"]), ins[1] if len(ins) > 1 else None, a.get("eps")),
        "group_norm": lambda ins, a: F.group_norm(ins[0], a["num_groups"], ins[1] if len(ins) > 1 else None,
                                                  ins[2] if len(ins) > 2 else None, A(a, "eps", 1e-5)),
        "max_pool": lambda ins, a: pool(F.max_pool1d, F.max_pool2d, F.max_pool3d, ins[0], a, dilation=per_dim(A(a, "dilation", [1]), len(a["kernel_size"]))),
        "avg_pool": lambda ins, a: pool(F.avg_pool1d, F.avg_pool2d, F.avg_pool3d, ins[0], a, count_include_pad=A(a, "count_include_pad", True)),
        "addmm": lambda ins, a: torch.addmm(ins[0], ins[1], ins[2], beta=A(a, "beta", 1), alpha=A(a, "alpha", 1)),
        "tril": tri(torch.tril), "triu": tri(torch.triu),
        "softmax": softmax(torch.softmax), "log_softmax": softmax(torch.log_softmax),
        "layer_norm": layer_norm, "embedding": embedding, "gather": gather, "scatter_add": scatter_add, "scatter": scatter, "scatter_reduce": scatter_reduce, "scatter_fold": scatter_fold, "sort": sort, "topk": topk, "cross_entropy": cross_entropy, "nll_loss": nll_loss,
        "dropout": dropout, "rand": rand,
    }
    return ops


def load_input(np, torch, path, ty):
    arr = np.load(path)
    want = torch_dtype(torch, ty.dtype)
    t = torch.from_numpy(np.array(arr, order="C"))  # (ascontiguousarray makes 0-d arrays 1-d)
    if tuple(t.shape) != ty.shape:
        raise RuntimeError(f"input {path} has shape {tuple(t.shape)}, the graph wants {ty}")
    t = t.to(want)  # bf16 comes as f32 (exact)
    if ty.strides is not None and tuple(ty.strides) != ty.contiguous_strides():
        s = torch.empty_strided(ty.shape, ty.strides, dtype=want)
        s.copy_(t)
        t = s
    return t.to(DEVICE)


def evaluate(torch, F, g, inputs, notes):
    ops = make_ops(torch, F)
    env = dict(inputs)
    for n in g.nodes:
        if n.op not in ops:
            raise RuntimeError(f"line {n.line}: no PyTorch mapping for op '{n.op}'")
        ins = [env[v] for v in n.inputs]
        try:
            r = ops[n.op](ins, n.attrs)
        except Skip:
            raise
        except Exception as e:
            # Some CPU kernels lack f16/bf16 support in older torch; the same op on CUDA is
            # still PyTorch's semantics (noted, results brought back to the CPU).
            if not (torch.cuda.is_available() and "not implemented for" in str(e)):
                raise RuntimeError(f"line {n.line}: {n.op}: torch raised {type(e).__name__}: {e}") from None
            try:
                r = ops[n.op]([t.cuda() for t in ins], n.attrs)
                r = [t.cpu() for t in r] if isinstance(r, list) else r.cpu()
                notes.append(f"line {n.line}: {n.op} ran on CUDA ({e})")
            except Exception as e2:
                raise RuntimeError(f"line {n.line}: {n.op}: torch raised {type(e2).__name__}: {e2}") from None
        rs = r if isinstance(r, list) else [r]
        if len(rs) != len(n.results):
            raise RuntimeError(f"line {n.line}: {n.op} gave {len(rs)} results, kiln {len(n.results)}")
        for name, t in zip(n.results, rs):
            env[name] = t
    return env


def compare(np, torch, name, ty, got_t, kiln_arr):
    """Returns (ok, message, max_abs, max_rel, only_finite_mismatches)."""
    problems = []
    tdt = dtype_name(torch, got_t.dtype)
    if tdt != ty.dtype:
        problems.append(f"%{name}: torch dtype {tdt}, kiln {ty.dtype}")
    if tuple(got_t.shape) != ty.shape:
        problems.append(f"%{name}: torch shape {list(got_t.shape)}, kiln {list(ty.shape)}")
    saved_dt = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "float32", "i64": "int64",
                "i32": "int32", "bool": "bool"}[ty.dtype]
    if str(kiln_arr.dtype) != saved_dt:
        problems.append(f"%{name}: kiln saved {kiln_arr.dtype}, its type says {ty.dtype}")
    if tuple(kiln_arr.shape) != ty.shape:
        problems.append(f"%{name}: kiln saved shape {list(kiln_arr.shape)}, its type says {list(ty.shape)}")
    if problems:
        return False, "; ".join(problems), 0.0, 0.0, False
    t = got_t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.to(torch.float32)
    ours = t.contiguous().numpy()
    if ty.dtype in TOL:
        rtol, atol = TOL[ty.dtype]
        with np.errstate(invalid="ignore", over="ignore"):
            return compare_floats(np, name, kiln_arr.astype(np.float64), ours.astype(np.float64), rtol, atol)
    return compare_ints(np, name, kiln_arr, ours)


def compare_floats(np, name, a, b, rtol, atol):
    """Returns (ok, message, max_abs, max_rel, only_finite_mismatches)."""
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    inf_a, inf_b = np.isinf(a), np.isinf(b)
    bad = nan_a != nan_b
    bad |= (inf_a | inf_b) & ~(nan_a | nan_b) & (a != b)
    fin = np.isfinite(a) & np.isfinite(b)
    diff = np.where(fin, np.abs(a - b), 0.0)
    bad |= fin & (diff > atol + rtol * np.abs(b))
    max_abs = float(diff.max()) if diff.size else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(fin & (b != 0), diff / np.abs(b), np.where(fin & (diff > 0), np.inf, 0.0))
    max_rel = float(rel.max()) if rel.size else 0.0
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        idx = np.unravel_index(i, a.shape) if a.ndim else ()
        special = bool((bad & ~fin).any())
        return (False, f"%{name}: {int(bad.sum())}/{bad.size} elements differ, first at {list(map(int, idx))}: "
                       f"kiln {float(a.reshape(-1)[i])!r}, torch {float(b.reshape(-1)[i])!r}", max_abs, max_rel,
                not special)
    return True, "", max_abs, max_rel, False


def compare_ints(np, name, kiln_arr, ours):
    a, b = kiln_arr.astype(np.int64), ours.astype(np.int64)
    bad = a != b
    max_abs = float(np.abs(a - b).max()) if a.size else 0.0
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        idx = np.unravel_index(i, a.shape) if a.ndim else ()
        return (False, f"%{name}: {int(bad.sum())}/{bad.size} elements differ, first at {list(map(int, idx))}: "
                       f"kiln {int(a.reshape(-1)[i])}, torch {int(b.reshape(-1)[i])}", max_abs, 0.0, False)
    return True, "", max_abs, 0.0, False


def only_f32_f64(g):
    """Every float type in the graph is f32 or f64 (so evaluating in f64 changes no semantics)."""
    types = [t for _, t in g.params] + [t for n in g.nodes for t in n.types if t is not None]
    dtype_attrs = [v.name for n in g.nodes for v in n.attrs.values() if isinstance(v, Dtype)]
    return all(t.dtype not in ("f16", "bf16") for t in types) and not {"f16", "bf16"} & set(dtype_attrs)


def check_case(np, torch, F, case, d, graph_name=None):
    """Returns ('PASS'|'FAIL'|'SKIP', detail, notes)."""
    with open(case) as f:
        graphs = parse_kir(f.read(), case)
    if graph_name:
        graphs = [g for g in graphs if g.name == graph_name]
    if not graphs:
        return "FAIL", "no graph", []
    g = graphs[0]
    random_ops = sorted({n.op for n in g.nodes if n.op in ("dropout", "rand")})
    if random_ops:
        return "SKIP", f"skipped: {', '.join(random_ops)} (kiln's random stream is not torch's)", []
    in_dir, out_dir = os.path.join(d, "in"), os.path.join(d, "out")
    if not os.path.isdir(out_dir):
        in_dir = out_dir = d
    if not os.path.isdir(out_dir) or os.path.exists(os.path.join(d, "KILN_FAILED")):
        msg = ""
        p = os.path.join(d, "KILN_FAILED")
        if os.path.exists(p):
            msg = open(p).read().strip().splitlines()[-1:] or [""]
            msg = msg[0]
        return "FAIL", f"kiln run failed: {msg}", []
    inputs = {}
    for p, ty in g.params:
        inputs[p] = load_input(np, torch, os.path.join(in_dir, file_stem(p) + ".npy"), ty)
    notes = []
    try:
        env = evaluate(torch, F, g, inputs, notes)
    except Skip as s:
        return "SKIP", f"skipped: {s}", []
    except Exception as e:
        return "FAIL", f"torch evaluation failed: {e}", notes
    ok, msgs, worst_abs, worst_rel = True, [], 0.0, 0.0
    env64 = None
    for o in g.outputs:
        ty = g.type_of(o)
        kiln_arr = np.load(os.path.join(out_dir, file_stem(o) + ".npy"))
        good, msg, ma, mr, finite_only = compare(np, torch, o, ty, env[o], kiln_arr)
        if not good and finite_only and ty.dtype == "f32" and only_f32_f64(g):
            # kiln computes each op in double and rounds once; torch in f32 op by op. A finite
            # miss may be torch's f32 rounding: evaluate the same graph with f32 inputs as f64
            # (promotion carries f64 through) and compare kiln with that, rounded to f32.
            if env64 is None:
                try:
                    env64 = evaluate(torch, F, g, {k: (v.double() if v.dtype == torch.float32 else v)
                                                   for k, v in inputs.items()}, [])
                except Exception as e:
                    env64 = {"error": str(e)}
            if o in env64:
                good64, msg64, ma64, mr64, _ = compare(np, torch, o, ty, env64[o].to(torch.float32), kiln_arr)
            else:
                good64, msg64, ma64, mr64 = False, f"evaluation in f64 failed: {env64.get('error')}", 0.0, 0.0
            if good64:
                notes.append(f"%{o}: within f32 rounding: torch in f32 misses the tolerance ({msg}); "
                             f"torch in f64 agrees with kiln (max_abs={ma64:.3g} max_rel={mr64:.3g})")
                good = True
            else:
                msg += f" [torch in f64 differs too: {msg64}]"
        worst_abs, worst_rel = max(worst_abs, ma), max(worst_rel, mr)
        if not good:
            ok = False
            msgs.append(msg)
        # Views: kiln's types claim PyTorch's strides; tell where they do not (not a failure).
        prod = g.producer(o)
        if prod is not None and prod.op in VIEW_OPS and env[o].numel() > 1:
            ts = tuple(env[o].stride())
            ks = ty.full_strides()
            relevant = [i for i, s in enumerate(ty.shape) if s != 1]
            if any(ts[i] != ks[i] for i in relevant):
                notes.append(f"%{o} = {prod.op}: torch strides {list(ts)}, kiln {list(ks)}")
    detail = f"max_abs={worst_abs:.3g} max_rel={worst_rel:.3g}"
    if not ok:
        return "FAIL", detail + " | " + " | ".join(msgs), notes
    return "PASS", detail, notes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("args", nargs="+", help="CASE.kir DIR pairs (or .kir files with --parse-only)")
    ap.add_argument("--graph", help="which graph, when a file holds several")
    ap.add_argument("--parse-only", action="store_true", help="parse each file and print it back")
    ap.add_argument("--device", default="cpu", help="where torch evaluates (default cpu; e.g. cuda)")
    opts = ap.parse_args(argv)
    if opts.parse_only:
        for f in opts.args:
            with open(f) as fh:
                for g in parse_kir(fh.read(), f):
                    sys.stdout.write(print_graph(g))
        return 0
    if len(opts.args) % 2:
        ap.error("give CASE.kir DIR pairs")
    import numpy as np
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    global DEVICE
    DEVICE = opts.device
    if DEVICE != "cpu":
        torch.set_default_device(DEVICE)  # creation ops too
    passed = failed = skipped = 0
    for case, d in zip(opts.args[::2], opts.args[1::2]):
        label = f"{os.path.basename(case)} [{os.path.basename(os.path.normpath(d))}]"
        try:
            status, detail, notes = check_case(np, torch, F, case, d, opts.graph)
        except Exception as e:
            status, detail, notes = "FAIL", f"{type(e).__name__}: {e}", []
        print(f"{status} {label}: {detail}", flush=True)
        for n in notes:
            print(f"  NOTE {n}", flush=True)
        if status == "PASS":
            passed += 1
        elif status == "SKIP":
            skipped += 1
        else:
            failed += 1
    print(f"{passed} passed, {failed} failed" + (f" ({skipped} skipped)" if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
