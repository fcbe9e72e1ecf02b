#!/usr/bin/env python3
"""Lists what the real models under tests/data/real_models need from an
ONNX importer: ops (count, opset, attribute values, input dtypes) and the
Shape-computation chains the exporters wrote. Writes OPS.md there and
prints the same text.

    /work/venv-export/bin/python tools/onnx_op_inventory.py [DIR] [--stdout]
    python3 tools/onnx_op_inventory.py path/to/model.onnx ...   # your own models: prints only

Needs only the `onnx` package. The `importer` column marks the ops that the
C importer's op registry already has a row for (`{"Op", ...}` rows of the
family files formats/onnx/onnx_op_*.c). A chain starts at a Shape (or Size) node and
follows its consumers while they compute a small value (rank <= 1, at most
MAX_SMALL elements, after ONNX shape inference): Gather, Unsqueeze, Concat,
arithmetic, Cast... It ends at the first consumer whose output is a full
tensor, named with the input slot that the small value feeds (for example
`Reshape.shape`, `Range.limit`, `Slice.ends`). These are what the importer
folds into symbolic shapes. Likewise from each integer graph input (token
ids, masks) through int and bool values to the first float op.
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


def walk_chains(model, opset, starts, carries):
    """Counter of 'Start → Op → ... → Op.slot' strings: from each (value,
    label) in starts, through every consumer that `carries` (node -> bool)
    the value on, to the first that does not (named with its input slot)."""
    consumers = collections.defaultdict(list)
    for n in model.graph.node:
        for i, x in enumerate(n.input):
            if x:
                consumers[x].append((n, i))
    outputs = {o.name for o in model.graph.output}
    found = collections.Counter()
    budget = [MAX_PATHS]

    def walk(value, path, seen):
        users = consumers.get(value, [])
        if value in outputs:
            found[" → ".join(path) + " → (graph output)"] += 1
        for node, idx in users:
            budget[0] -= 1
            if budget[0] <= 0 or node.name in seen:
                continue
            if carries(node):
                for o in node.output:
                    if o:
                        walk(o, path + [node.op_type], seen | {node.name})
            else:
                sink = f"{node.op_type}.{slot_name(node.op_type, node.domain, opset, idx)}"
                found[" → ".join(path + [sink])] += 1

    for value, label in starts:
        walk(value, [label], set())
    return found


def shape_chains(model, types, opset):
    """Chains from Shape/Size through small values (see the module doc)."""
    starts = [(n.output[0], shape_label(n)) for n in model.graph.node
              if n.op_type in ("Shape", "Size")]
    return walk_chains(model, opset, starts,
                       lambda n: n.output and all(is_small(types, o) for o in n.output if o))


INT_TYPES = {onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.BOOL}


def input_chains(model, types, opset):
    """Chains from integer graph inputs (token ids, masks) through integer and
    bool values, to the first op whose output is float (or a Shape)."""
    inits = {t.name for t in model.graph.initializer}
    starts = [(i.name, i.name) for i in model.graph.input
              if i.name not in inits and i.type.tensor_type.elem_type in INT_TYPES]

    def carries(n):
        return n.op_type not in ("Shape", "Size") and n.output and all(
            types.get(o, (None,))[0] in INT_TYPES for o in n.output if o)
    return walk_chains(model, opset, starts, carries)


def shape_label(node):
    """Shape, or Shape[start:end] when the opset 15 attributes slice it."""
    a = {x.name: x.i for x in node.attribute}
    if not a:
        return node.op_type
    return f"{node.op_type}[{a.get('start', 0)}:{a.get('end', '')}]"


def importer_ops(src_root):
    """Op names in the C importer's registry: `{"Name", ...}` rows in formats/onnx/onnx_op_*.c."""
    d = os.path.join(src_root, "formats", "onnx")
    found = set()
    if os.path.isdir(d):
        for f in sorted(os.listdir(d)):
            if f.startswith("onnx_op_") and f.endswith(".c"):
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


def find_models(paths):
    """name -> model path: each .onnx path given, or every <dir>/*/manifest.json's model."""
    found = {}
    for p in paths:
        if os.path.isfile(p):
            stem = os.path.splitext(os.path.basename(p))[0]
            if stem == "model":  # name exported models after their folder
                stem = os.path.basename(os.path.dirname(os.path.abspath(p)))
            found[stem] = p
            continue
        for d in sorted(os.listdir(p)):
            mf = os.path.join(p, d, "manifest.json")
            if os.path.isfile(mf):
                with open(mf) as f:
                    found[d] = os.path.join(p, d, json.load(f)["model"])
    return found


def graph_inputs(model):
    inits = {t.name for t in model.graph.initializer}
    out = []
    for i in model.graph.input:
        if i.name in inits:
            continue
        t = i.type.tensor_type
        dims = ",".join(d.dim_param or str(d.dim_value) for d in t.shape.dim)
        out.append(f"{i.name}:{TYPE_NAMES.get(t.elem_type, '?')}[{dims}]")
    return out


def inventory(models):
    names = list(models)
    per_model = {}
    op_models = collections.defaultdict(dict)  # op -> model -> count
    op_sigs = collections.defaultdict(collections.Counter)  # op -> "(i64, f32)" -> count
    op_attrs = collections.defaultdict(set)  # op -> "name=value"
    op_opsets = collections.defaultdict(set)
    all_chains = collections.defaultdict(collections.Counter)  # chain -> model -> count
    all_inputs = collections.defaultdict(collections.Counter)  # same, from int inputs
    for name in names:
        model, inferred = load(models[name])
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
        ext = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
        ext_files = sorted({e.value for t in ext for e in t.external_data if e.key == "location"})
        init_types = collections.Counter(TYPE_NAMES[t.data_type] for t in model.graph.initializer)
        const_types = collections.Counter(
            TYPE_NAMES[a.t.data_type] for n in model.graph.node if n.op_type == "Constant"
            for a in n.attribute if a.name == "value")
        found = shape_chains(model, types, opset)
        for c, k in found.items():
            all_chains[c][name] += k
        for c, k in input_chains(model, types, opset).items():
            all_inputs[c][name] += k
        dim_params = {}
        for where, vis in (("outputs", model.graph.output), ("value_info", model.graph.value_info)):
            c = collections.Counter(d.dim_param for vi in vis
                                    for d in vi.type.tensor_type.shape.dim if d.dim_param)
            dim_params[where] = c
        per_model[name] = dict(inputs=graph_inputs(model), ext_files=ext_files, opset=opset,
                               dim_params=dim_params, ir=model.ir_version,
                               nodes=len(model.graph.node), counts=counts, ext=ext,
                               init_types=init_types, const_types=const_types,
                               domains=sorted({o.domain or "ai.onnx" for o in model.opset_import}),
                               chains=found)
    return names, per_model, op_models, op_sigs, op_attrs, op_opsets, all_chains, all_inputs


def short(name):
    return name.replace("_torchscript", "/ts").replace("_dynamo", "/dy")


def render(models, src_root):
    names, per_model, op_models, op_sigs, op_attrs, op_opsets, all_chains, all_inputs = \
        inventory(models)
    known = importer_ops(src_root)
    L = []
    w = L.append
    w("# ONNX ops and shape chains of the real models")
    w("")
    w("Generated by `tools/onnx_op_inventory.py`; do not edit by hand. For the folder of")
    w("tests/data/real_models (made by `tools/export_models.py`): `ts` = TorchScript exporter")
    w("(`dynamo=False`), `dy` = dynamo exporter (`dynamo=True`). Input dtypes come from ONNX")
    w("shape inference (`?` = not inferred, `-` = omitted optional input).")
    w("")
    w("## Models")
    w("")
    w("| model | opset | IR | nodes | inputs | external data | initialisers | Constant nodes |")
    w("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in names:
        p = per_model[n]
        ins = ", ".join(p["inputs"])
        ext = f"{len(p['ext'])} tensors in {', '.join(p['ext_files'])}" if p["ext"] else "-"
        it = ", ".join(f"{k} {v}" for k, v in sorted(p["init_types"].items()))
        ct = ", ".join(f"{k} {v}" for k, v in sorted(p["const_types"].items())) or "-"
        w(f"| {n} | {p['opset']} | {p['ir']} | {p['nodes']} | {ins} | {ext} | {it} | {ct} |")
    w("")
    w("## dim_params of outputs and value_info")
    w("")
    w("Exporters also name dims of outputs and intermediate values, with names that are")
    w("no input's dim (an expression such as `batch*seq`, or a made-up name): the importer")
    w("must not take these for dims to bind.")
    w("")
    w("| model | outputs | value_info |")
    w("| --- | --- | --- |")
    for n in names:
        dp = per_model[n]["dim_params"]
        cell = [", ".join(f"`{k}` {v}" for k, v in sorted(dp[x].items())) or "-"
                for x in ("outputs", "value_info")]
        w(f"| {n} | {cell[0]} | {cell[1]} |")
    w("")
    w("## Ops: count per model")
    w("")
    w("Column `importer`: whether the C importer's op registry has a row for the op (`{\"Op\", ...}`")
    w("in formats/onnx/onnx_op_*.c) when this file was generated; `no` = still to implement.")
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
    w("## Token and mask chains")
    w("")
    w("From each integer graph input, through ops whose outputs are int or bool, to the first")
    w("op whose output is float (or a Shape, which starts a chain above): embedding lookups,")
    w("position ids, attention and causal masks.")
    w("")
    w("| chain | " + " | ".join(short(n) for n in names) + " |")
    w("| --- |" + " --- |" * len(names))
    for c in sorted(all_inputs, key=lambda c: (-sum(all_inputs[c].values()), c)):
        w(f"| `{c}` | " + " | ".join(str(all_inputs[c].get(n, "")) for n in names) + " |")
    w("")
    return "\n".join(L)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    args = [a for a in sys.argv[1:] if a != "--stdout"]
    paths = args or [os.path.join(here, "..", "tests", "data", "real_models")]
    models = find_models(paths)
    if not models:
        sys.exit(f"onnx_op_inventory: no .onnx file or */manifest.json under {', '.join(paths)}")
    text = render(models, os.path.join(here, ".."))
    print(text)
    # OPS.md is written for one folder of test models; a model file is only printed
    if "--stdout" not in sys.argv and len(paths) == 1 and os.path.isdir(paths[0]):
        with open(os.path.join(paths[0], "OPS.md"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
