"""Every element type the library has (float32, int64, int32, bool), in and
out, through a model whose inputs and outputs use each one."""
import numpy as np
import pytest

import shapejit

TYPED = """\
graph typed(N) {
  input ids: int64[N]
  input pos: int32[N, 2]
  input mask: bool[N]
  input x: [N, 3]
  twice = add(ids, ids)
  step = add(pos, pos)
  flipped = not(mask)
  y = add(x, x)
  output twice
  output step
  output flipped
  output y
}
"""


@pytest.fixture(params=["host", "interp"])
def typed(request, tmp_path):
    path = tmp_path / "typed.sjg"
    path.write_text(TYPED)
    try:
        e = shapejit.Engine(path, ladder="list:4,16", store=None, backend=request.param)
    except shapejit.ModelError as exc:
        if "int64" not in str(exc):
            raise
        pytest.skip(f"this build of the library has no typed inputs yet: {exc}")
    with e:
        yield e


def run(engine, f):
    """engine.run; a backend the library cannot compile typed values for yet
    is reported as a skip with the library's message (the interpreter runs
    them, so every dtype is still checked end to end)."""
    try:
        return engine.run(f)
    except shapejit.UnsupportedError as exc:
        if engine.target == "interp":
            raise
        pytest.skip(f"{engine.target} backend: {exc}")


def feed(n):
    rng = np.random.default_rng(n)
    return {"ids": rng.integers(-2**40, 2**40, n, dtype=np.int64),
            "pos": rng.integers(-2**20, 2**20, (n, 2), dtype=np.int32),
            "mask": rng.integers(0, 2, n).astype(np.bool_),
            "x": rng.standard_normal((n, 3)).astype(np.float32)}


def test_descriptions_name_each_dtype(typed):
    assert [(i.name, i.dtype) for i in typed.inputs] == [
        ("ids", "int64"), ("pos", "int32"), ("mask", "bool"), ("x", "float32")]
    assert [o.dtype for o in typed.outputs] == ["int64", "int32", "bool", "float32"]


@pytest.mark.parametrize("n", [1, 3, 4, 11])
def test_every_dtype_in_and_out(typed, n):
    f = feed(n)
    out = run(typed, f)
    want = {"twice": f["ids"] * 2, "step": f["pos"] * 2, "flipped": ~f["mask"],
            "y": f["x"] * 2}
    for name, w in want.items():
        assert out[name].dtype == w.dtype and out[name].shape == w.shape, name
        np.testing.assert_array_equal(out[name], w)


def test_strided_inputs_of_every_dtype(typed):
    f = feed(6)
    strided = {k: np.repeat(v, 2, axis=0)[::2] for k, v in f.items()}
    assert not any(v.flags.c_contiguous for v in strided.values())
    got, want = run(typed, strided), run(typed, f)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


@pytest.mark.parametrize("name,wrong", [("ids", np.int32), ("pos", np.int64),
                                        ("mask", np.uint8), ("x", np.int64)])
def test_wrong_dtype_for_each_input(typed, name, wrong):
    f = feed(3)
    f[name] = f[name].astype(wrong)
    with pytest.raises(shapejit.DtypeError, match=f"input '{name}': dtype {np.dtype(wrong).name}"):
        typed.run(f)
