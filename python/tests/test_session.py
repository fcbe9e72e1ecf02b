"""shapejit.InferenceSession against the .npy expectations of the exported
test models (tests/data/models: made by tools/gen_models.py and checked
against onnxruntime; tests/data/real_models: transformer exports with
torch's outputs, when present)."""
import json

import numpy as np
import pytest

import shapejit
from conftest import ONNX_MODELS, REAL_MODELS

# tests/models.cmake's list; mlp_static declares fixed sizes (dynamic axis 0 of x).
MODELS = ["mlp_matmul", "mlp_gemm", "ffn_decomposed_ln_op13", "ffn_decomposed_ln_op18",
          "ffn_layernorm_op17", "classifier_op13", "classifier_op18", "attention_2d",
          "attention_batch1_op17", "two_inputs", "seq_pooling", "gram_gemm", "mlp_ir3",
          "constant_attrs", "layernorm_over_seq_op17", "mlp_static"]
OPTIONS = {"mlp_static": {"dynamic": ("x", 0)}}
ORT_TYPES = {"tensor(float)", "tensor(int64)", "tensor(int32)", "tensor(bool)"}


def _cases(folder, first=None):
    sizes = sorted(int(p.name) for p in folder.iterdir() if p.is_dir() and p.name.isdigit())
    for n in sizes[:first]:
        feed = {p.stem: np.load(p) for p in sorted((folder / str(n) / "in").glob("*.npy"))}
        want = {p.stem: np.load(p) for p in sorted((folder / str(n) / "out").glob("*.npy"))}
        yield n, feed, want


def _check_session(sess, folder, rtol, atol, compare=None, first=None):
    names = [o.name for o in sess.get_outputs()]
    for n, feed, want in _cases(folder, first):
        outs = sess.run(None, feed)
        assert len(outs) == len(names)
        for name, got in zip(names, outs):
            if name not in want or (compare and name not in compare):
                continue
            assert got.shape == want[name].shape, (name, n)
            np.testing.assert_allclose(got, want[name], rtol=rtol, atol=atol,
                                       err_msg=f"{folder.name} output {name} at {n}")
        # Asking for one output by name gives that one.
        (one,) = sess.run([names[-1]], feed)
        np.testing.assert_array_equal(one, outs[-1])


@pytest.mark.parametrize("model", MODELS)
def test_exported_models_match_expectations(model, tmp_path):
    sess = shapejit.InferenceSession(str(ONNX_MODELS / f"{model}.onnx"),
                                     providers=["CPUExecutionProvider"], store=tmp_path / "s.db",
                                     **OPTIONS.get(model, {}))
    ins = sess.get_inputs()
    assert ins and all(isinstance(i.name, str) and i.type in ORT_TYPES for i in ins)
    assert any(isinstance(d, str) for i in ins for d in i.shape)  # the dynamic dim, by name
    assert sess.get_providers() == ["CPUExecutionProvider"]
    _check_session(sess, ONNX_MODELS / model, rtol=1e-4, atol=1e-4)


def _real_models():
    if not REAL_MODELS.is_dir():
        return []
    return sorted(p.parent.name for p in REAL_MODELS.glob("*/manifest.json"))


@pytest.mark.parametrize("model", _real_models())
def test_transformer_exports_match_torch(model, tmp_path):
    folder = REAL_MODELS / model
    m = json.loads((folder / "manifest.json").read_text())
    try:
        sess = shapejit.InferenceSession(str(folder / m["model"]), store=tmp_path / "s.db",
                                         dynamic=m.get("dynamic"), dims=m.get("dims"))
    except (shapejit.UnsupportedError, shapejit.ModelError) as exc:
        pytest.skip(f"shapejit cannot load {model} yet: {exc}")
    assert [i.name for i in sess.get_inputs()] == [i["name"] for i in m["inputs"]]
    for got, want in zip(sess.get_inputs(), m["inputs"]):
        assert got.type == {"float32": "tensor(float)", "int64": "tensor(int64)",
                            "int32": "tensor(int32)", "bool": "tensor(bool)"}[want["dtype"]]
        # a dim tied to the dynamic one is spelled as the manifest ties it
        ties = {m["dims"][d] for d in want["shape"] if isinstance(d, str) and
                isinstance((m["dims"] or {}).get(d), str)}
        assert all(d == m["dynamic"] or d in ties or isinstance(d, int) for d in got.shape), got
    assert any(m["dynamic"] in i.shape for i in sess.get_inputs())
    # The binding's part (names, dtypes, int64 ids and masks, two sizes in
    # two buckets of one session): the C suite's real_models tests run
    # every length on the host and the interpreter, each bucket compiled.
    _check_session(sess, folder, rtol=m["rtol"], atol=m["atol"], compare=m.get("compare"), first=2)


def _batched_models():
    if not REAL_MODELS.is_dir():
        return []
    return sorted(p.parent.name for p in REAL_MODELS.glob("*/manifest.json")
                  if json.loads(p.read_text()).get("batches"))


@pytest.mark.parametrize("model", _batched_models())
def test_transformer_exports_served_by_batch(model, tmp_path):
    """The batch bucketed at the manifest's fixed length: Engine.run takes
    the batch from the arrays' shapes, and the exporters' merges of the
    batch with the heads are dims that are multiples of it
    (nn.MultiheadAttention's merge of the batch with the sequence in front
    of it is built compact)."""
    folder = REAL_MODELS / model
    m = json.loads((folder / "manifest.json").read_text())
    sess = shapejit.InferenceSession(str(folder / m["model"]), store=tmp_path / "s.db",
                                     dynamic="batch", dims={"seq": m["batch_seq"]})
    names = [o.name for o in sess.get_outputs()]
    for b in m["batches"]:
        feed = {p.stem: np.load(p) for p in sorted((folder / f"b{b}" / "in").glob("*.npy"))}
        for name, got in zip(names, sess.run(None, feed)):
            if name not in m["compare"]:
                continue
            want = np.load(folder / f"b{b}" / "out" / f"{name}.npy")
            assert got.shape == want.shape, (name, b)
            np.testing.assert_allclose(got, want, rtol=m["rtol"], atol=m["atol"],
                                       err_msg=f"{model} output {name} at batch {b}")


def test_node_args_as_onnxruntime_spells_them():
    sess = shapejit.InferenceSession(ONNX_MODELS / "two_inputs.onnx", store=None)
    x, gain = sess.get_inputs()
    assert (x.name, x.type, x.shape[1:]) == ("x", "tensor(float)", [16])
    assert isinstance(x.shape[0], str)
    assert (gain.name, gain.shape) == ("gain", [1, 16])
    (y,) = sess.get_outputs()
    assert y.name == "y" and y.shape[1:] == [8]
    assert "NodeArg(name='x'" in repr(x)


def test_session_errors(tmp_path):
    path = ONNX_MODELS / "two_inputs.onnx"
    with pytest.raises(shapejit.InvalidArgumentError, match="file path"):
        shapejit.InferenceSession(path.read_bytes())
    with pytest.raises(shapejit.InvalidArgumentError, match="TensorrtExecutionProvider"):
        shapejit.InferenceSession(path, providers=["TensorrtExecutionProvider"])
    sess = shapejit.InferenceSession(path, store=None, ladder="list:8")
    feed = {"x": np.ones((2, 16), np.float32), "gain": np.ones((1, 16), np.float32)}
    with pytest.raises(shapejit.NotFoundError, match="output 'nope'"):
        sess.run(["nope"], feed)
    with pytest.raises(shapejit.InvalidArgumentError, match="'gain'"):
        sess.run(None, {"x": feed["x"]})
    with pytest.raises(shapejit.OutOfRangeError):
        sess.run(None, {"x": np.ones((9, 16), np.float32), "gain": feed["gain"]})
    with pytest.raises(shapejit.ModelError):
        shapejit.InferenceSession(ONNX_MODELS / "bad" / "garbage.onnx")
    assert sess.engine.stats()["run_failures"] == 2
