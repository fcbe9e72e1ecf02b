#!/usr/bin/env python3
"""Lists what the real models under tests/data/real_models need from an
ONNX importer: ops (count, opset, attribute values, input dtypes) and the
Shape-computation chains the exporters wrote. Writes OPS.md there and
prints the same text.

    /work/venv-export/bin/python tools/onnx_op_inventory.py [DIR] [--stdout]

Needs only the `onnx` package. The `importer` column marks the ops that the
C importer's op tables (jit/onnx/*.c) already name. A chain starts at a Shape (or Size) node and
follows its consumers while they compute a small value (rank <= 1, at most
MAX_SMALL elements, after ONNX shape inference): Gather, Unsqueeze, Concat,
arithmetic, Cast... It ends at the first consumer whose output is a full
tensor, named with the input slot that the small value feeds (for example
`Reshape.shape`, `Range.limit`, `Slice.ends`). These are what the importer
folds into symbolic shapes.
"""
import collections
import json
import os
import re
import sys

import onnx
from onnx import shape_inference

MAX_SMALL = 8
MAX_PATHS = 20000
TYPE_NAMES = {v: k.lower() for k, v in onnx.TensorProto.DataType.items()}
TYPE_NAMES[onnx.TensorProto.FLOAT] = "f32"
TYPE_NAMES[onnx.TensorProto.INT64] = "i64"
TYPE_NAMES[onnx.TensorProto.INT32] = "i32"
TYPE_NAMES[onnx.TensorProto.BOOL] = "bool"
# attributes worth listing per op (others, like Constant's value, are noise)
SKIP_ATTRS = {"value"}


def load(path):
    m = onnx.load(path, load_external_data=False)
    inferred = shape_inference.infer_shapes(m, data_prop=True)
    return m, inferred


def value_types(inferred):
    """name -> (elem_type, shape list with None for unknown/symbolic)."""
    g = inferred.graph
    out = {}
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        t = vi.type.tensor_type
        shape = None
        if t.HasField("shape"):
            shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                     for d in t.shape.dim]
        out[vi.name] = (t.elem_type, shape)
    for init in g.initializer:
        out[init.name] = (init.data_type, list(init.dims))
    for n in g.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    out[n.output[0]] = (a.t.data_type, list(a.t.dims))
    return out


def is_small(types, name):
    t = types.get(name)
    if not t or t[1] is None:
        return False
    shape = t[1]
    if len(shape) > 1 or any(not isinstance(d, int) for d in shape):
        return False
    return (shape[0] if shape else 1) <= MAX_SMALL


def slot_name(op, domain, opset, index):
    try:
        schema = onnx.defs.get_schema(op, opset, domain)
        ins = schema.inputs
        if index < len(ins):
            return ins[index].name
        if ins and ins[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
            return ins[-1].name
    except onnx.defs.SchemaError:
        pass
    return str(index)


def chains(model, types, opset):
    """Counter of 'Shape → Gather → ... → Op.slot' strings."""
    consumers = collections.defaultdict(list)
    for n in model.graph.node:
        for i, x in enumerate(n.input):
            if x:
                consumers[x].append((n, i))
    found = collections.Counter()
    budget = [MAX_PATHS]

    def walk(value, path, seen):
        if budget[0] <= 0:
            return
        users = consumers.get(value, [])
        if not users:
            if any(o.name == value for o in model.graph.output):
                found[" → ".join(path) + " → (graph output)"] += 1
            return
        for node, idx in users:
            budget[0] -= 1
            if node.name in seen:
                continue
            small_out = node.output and all(is_small(types, o) for o in node.output if o)
            if small_out:
                for o in node.output:
                    if o:
                        walk(o, path + [node.op_type], seen | {node.name})
            else:
                sink = f"{node.op_type}.{slot_name(node.op_type, node.domain, opset, idx)}"
                found[" → ".join(path + [sink])] += 1

    for n in model.graph.node:
        if n.op_type in ("Shape", "Size"):
            walk(n.output[0], [shape_label(n)], {n.name})
    return found


def shape_label(node):
    """Shape, or Shape[start:end] when the opset 15 attributes slice it."""
    a = {x.name: x.i for x in node.attribute}
    if not a:
        return node.op_type
    return f"{node.op_type}[{a.get('start', 0)}:{a.get('end', '')}]"


def importer_ops(src_root):
    """Op names in the C importer's tables: `{"Name", ...}` entries in jit/onnx/*.c."""
    d = os.path.join(src_root, "jit", "onnx")
    found = set()
    if os.path.isdir(d):
        for f in sorted(os.listdir(d)):
            if f.endswith(".c"):
                with open(os.path.join(d, f)) as fh:
                    found.update(re.findall(r'\{\s*"([A-Z][A-Za-z0-9]*)"\s*,', fh.read()))
    return found


def attr_value(a):
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, list):
        v = [x.decode() if isinstance(x, bytes) else x for x in v]
    if a.name == "to":
        v = TYPE_NAMES.get(v, v)
    return v


def inventory(root):
    names = sorted(d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "manifest.json")))
    per_model = {}
    op_models = collections.defaultdict(dict)  # op -> model -> count
    op_sigs = collections.defaultdict(collections.Counter)  # op -> "(i64, f32)" -> count
    op_attrs = collections.defaultdict(set)  # op -> "name=value"
    op_opsets = collections.defaultdict(set)
    all_chains = collections.defaultdict(collections.Counter)  # chain -> model -> count
    for name in names:
        d = os.path.join(root, name)
        with open(os.path.join(d, "manifest.json")) as f:
            manifest = json.load(f)
        model, inferred = load(os.path.join(d, manifest["model"]))
        opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        types = value_types(inferred)
        counts = collections.Counter()
        for n in model.graph.node:
            op = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"
            counts[op] += 1
            op_opsets[op].add(opset)
            sig = ", ".join(TYPE_NAMES.get(types.get(x, (0,))[0], "?") if x else "-" for x in n.input)
            op_sigs[op][f"({sig})"] += 1
            for a in n.attribute:
                if a.name not in SKIP_ATTRS:
                    op_attrs[op].add(f"{a.name}={attr_value(a)}")
        for op, c in counts.items():
            op_models[op][name] = c
        ext = [t.name for t in model.graph.initializer
               if t.data_location == onnx.TensorProto.EXTERNAL]
        init_types = collections.Counter(TYPE_NAMES[t.data_type] for t in model.graph.initializer)
        const_types = collections.Counter(
            TYPE_NAMES[a.t.data_type] for n in model.graph.node if n.op_type == "Constant"
            for a in n.attribute if a.name == "value")
        found = chains(model, types, opset)
        for c, k in found.items():
            all_chains[c][name] += k
        per_model[name] = dict(manifest=manifest, opset=opset, ir=model.ir_version,
                               nodes=len(model.graph.node), counts=counts, ext=ext,
                               init_types=init_types, const_types=const_types,
                               domains=sorted({o.domain or "ai.onnx" for o in model.opset_import}),
                               chains=found)
    return names, per_model, op_models, op_sigs, op_attrs, op_opsets, all_chains


def short(name):
    return name.replace("_torchscript", "/ts").replace("_dynamo", "/dy")


def render(root, src_root):
    names, per_model, op_models, op_sigs, op_attrs, op_opsets, all_chains = inventory(root)
    known = importer_ops(src_root)
    L = []
    w = L.append
    w("# ONNX ops and shape chains of the real models")
    w("")
    w("Generated by `tools/onnx_op_inventory.py` from the models in this folder (made by")
    w("`tools/export_models.py`); do not edit by hand. `ts` = TorchScript exporter")
    w("(`dynamo=False`), `dy` = dynamo exporter (`dynamo=True`). Input dtypes come from ONNX")
    w("shape inference (`?` = not inferred, `-` = omitted optional input).")
    w("")
    w("## Models")
    w("")
    w("| model | opset | IR | nodes | inputs | external data | initialisers | Constant nodes |")
    w("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in names:
        p = per_model[n]
        ins = ", ".join(f"{i['name']}:{i['dtype']}[{','.join(map(str, i['shape']))}]"
                        for i in p["manifest"]["inputs"])
        ext = f"{len(p['ext'])} tensors in {p['manifest']['external_data']}" if p["ext"] else "-"
        it = ", ".join(f"{k} {v}" for k, v in sorted(p["init_types"].items()))
        ct = ", ".join(f"{k} {v}" for k, v in sorted(p["const_types"].items())) or "-"
        w(f"| {n} | {p['opset']} | {p['ir']} | {p['nodes']} | {ins} | {ext} | {it} | {ct} |")
    w("")
    w("## Ops: count per model")
    w("")
    w("Column `importer`: whether the op is named in the C importer's tables (`{\"Op\", ...}`")
    w("entries in jit/onnx/*.c) when this file was generated; `no` = still to implement.")
    w("")
    w("| op | importer | " + " | ".join(short(n) for n in names) + " |")
    w("| --- | --- |" + " --- |" * len(names))
    for op in sorted(op_models):
        w(f"| {op} | {'yes' if op in known else '**no**'} | "
          + " | ".join(str(op_models[op].get(n, "")) for n in names) + " |")
    w("")
    missing = sorted(op for op in op_models if op not in known)
    w(f"Not in the importer's tables ({len(missing)}): " + ", ".join(missing))
    w("")
    w("## Ops: opsets, attributes and input dtypes seen")
    w("")
    for op in sorted(op_models):
        sigs = ", ".join(f"`{s}`×{c}" for s, c in sorted(op_sigs[op].items(), key=lambda x: -x[1]))
        attrs = ", ".join(f"`{a}`" for a in sorted(op_attrs[op])) or "none"
        w(f"- **{op}** (opset {', '.join(map(str, sorted(op_opsets[op])))}): attributes {attrs};"
          f" inputs {sigs}")
    w("")
    w("## Shape-computation chains")
    w("")
    w(f"From each `Shape`/`Size`, following consumers while the value stays small (rank <= 1,")
    w(f"<= {MAX_SMALL} elements); the last step is the op and input slot that takes the small")
    w("value into a full tensor. Count = number of paths (a Concat joining two Shapes counts")
    w("once per Shape).")
    w("")
    w("| chain | " + " | ".join(short(n) for n in names) + " |")
    w("| --- |" + " --- |" * len(names))
    for c in sorted(all_chains, key=lambda c: (-sum(all_chains[c].values()), c)):
        w(f"| `{c}` | " + " | ".join(str(all_chains[c].get(n, "")) for n in names) + " |")
    w("")
    sinks = collections.defaultdict(collections.Counter)
    for c, per in all_chains.items():
        sinks[c.split(" → ")[-1]].update(per)
    w("### Where shape values end (sink op.slot: models)")
    w("")
    for s in sorted(sinks, key=lambda s: -sum(sinks[s].values())):
        w(f"- `{s}`: " + ", ".join(f"{short(n)} {k}" for n, k in sorted(sinks[s].items())))
    w("")
    return "\n".join(L)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    args = [a for a in sys.argv[1:] if a != "--stdout"]
    root = args[0] if args else os.path.join(here, "..", "tests", "data", "real_models")
    text = render(root, os.path.join(here, ".."))
    print(text)
    if "--stdout" not in sys.argv:
        with open(os.path.join(root, "OPS.md"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
