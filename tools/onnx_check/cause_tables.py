#!/usr/bin/env python3
"""The tables of docs/onnx.md ("The node tests kiln does not pass, by cause") from
`kiln onnx-test --device reference --verbose` on standard input: the unsupported cases grouped by
cause (operators, element types, features of imported operators), most cases first.

    build/bin/kiln onnx-test --device reference --verbose | tools/onnx_check/cause_tables.py
"""
import collections
import re
import sys


def table(rows, head):
    rows = sorted(rows, key=lambda r: (-len(r[1]), r[0]))
    out = [f"| {head} | cases | which (names without `test_`) |", "| --- | --- | --- |"]
    out += [f"| {c} | {len(names)} | {', '.join(names)} |" for c, names in rows]
    return "\n".join(out)


def main():
    by = collections.OrderedDict()
    for line in sys.stdin:
        m = re.match(r"unsupported (\S+): (.*)", line.strip())
        if not m:
            continue
        for cause in m.group(2).split("; "):
            by.setdefault(cause, []).append(m.group(1).removeprefix("test_"))
    ops, dtypes, features = [], [], []
    for cause, names in by.items():
        if cause.startswith("operator "):
            ops.append((cause[len("operator "):], names))
        elif cause.startswith("element type "):
            dtypes.append((cause[len("element type "):], names))
        else:
            features.append((cause, names))
    print("### Operators kiln does not import\n")
    print(table(ops, "operator") + "\n")
    print("### Element types kiln does not have\n")
    print(table(dtypes, "element type") + "\n")
    print("### Features of operators kiln imports, and inputs it does not take\n")
    print(table(features, "cause"))


if __name__ == "__main__":
    main()
