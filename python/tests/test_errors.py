"""Every kind of bad input raises a shapejit.Error subclass whose text is the
library's message (or, for what the Python layer checks, one that names the
input and what is wrong); nothing crashes."""
import numpy as np
import pytest

import shapejit
from conftest import ONNX_MODELS, REAL_MODELS, rand


def test_error_hierarchy():
    for cls in (shapejit.ModelError, shapejit.StoreError, shapejit.ShapeError,
                shapejit.DtypeError, shapejit.RemoteError, shapejit.ClosedError,
                shapejit.OutOfRangeError, shapejit.InvalidArgumentError):
        assert issubclass(cls, shapejit.Error)
    assert issubclass(shapejit.ShapeError, ValueError)
    assert issubclass(shapejit.OutOfRangeError, shapejit.ShapeError)
    assert issubclass(shapejit.DtypeError, TypeError)
    assert issubclass(shapejit.ClosedError, shapejit.StateError)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int64, np.int32, np.int8,
                                   np.uint8, np.bool_, np.complex64])
def test_wrong_dtype_is_refused_not_cast(engine, dtype):
    x = np.ones((3, 64), dtype=dtype)
    with pytest.raises(shapejit.DtypeError) as err:
        engine.run({"x": x})
    msg = str(err.value)
    assert "input 'x'" in msg and "float32" in msg
    assert f"dtype {np.dtype(dtype).name}" in msg
    assert err.value.status_name == "invalid argument"


def test_big_endian_is_refused(engine):
    with pytest.raises(shapejit.DtypeError, match="big-endian"):
        engine.run({"x": np.ones((3, 64), dtype=">f4")})


def test_not_an_array(engine):
    with pytest.raises(shapejit.DtypeError, match="input 'x': expected a numpy array of float32, got list"):
        engine.run({"x": [[0.0] * 64]})
    with pytest.raises(shapejit.InvalidArgumentError, match="dict"):
        engine.run([("x", rand((1, 64)))])
    with pytest.raises(shapejit.InvalidArgumentError, match="input names are str"):
        engine.run({1: rand((1, 64))})


def test_missing_and_extra_inputs(engine):
    with pytest.raises(shapejit.InvalidArgumentError, match="'x'") as err:
        engine.run({})
    assert err.value.status == -1
    with pytest.raises(shapejit.InvalidArgumentError, match="'z'"):
        engine.run({"x": rand((2, 64)), "z": rand((2, 64))})


def test_wrong_rank_and_shape(engine):
    with pytest.raises(shapejit.ShapeError, match="input 'x'"):
        engine.run({"x": rand((2, 32))})
    with pytest.raises(shapejit.ShapeError, match="input 'x'"):
        engine.run({"x": rand((2, 64, 1))})
    with pytest.raises(shapejit.ShapeError, match="input 'x'"):
        engine.run({"x": rand((64,))})
    too_deep = (1,) * shapejit.MAX_RANK + (64,)
    with pytest.raises(shapejit.ShapeError, match=f"rank {len(too_deep)}"):
        engine.run({"x": np.zeros(too_deep, np.float32)})


def test_sizes_outside_the_ladder(engine):
    with pytest.raises(shapejit.OutOfRangeError, match="65"):
        engine.run({"x": rand((65, 64))})
    with pytest.raises(shapejit.ShapeError, match="N = 0"):
        engine.run({"x": np.zeros((0, 64), np.float32)})


def test_input_with_a_fixed_shape_that_differs():
    # two_inputs: x [N, 16] and gain [1, 16].
    with shapejit.Engine(ONNX_MODELS / "two_inputs.onnx", ladder="list:8", store=None) as e:
        x, gain = rand((3, 16)), rand((1, 16))
        assert e.run({"x": x, "gain": gain})["y"].shape == (3, 8)
        with pytest.raises(shapejit.ShapeError, match="input 'gain'"):
            e.run({"x": x, "gain": rand((3, 16))})
        with pytest.raises(shapejit.InvalidArgumentError, match="'gain'"):
            e.run({"x": x})


def test_bad_models(tmp_path):
    with pytest.raises(shapejit.ModelError, match="nope.onnx"):
        shapejit.Engine(tmp_path / "nope.onnx", store=None)
    for bad in ("garbage.onnx", "truncated.onnx", "empty.onnx"):
        with pytest.raises(shapejit.ModelError, match=bad):
            shapejit.Engine(ONNX_MODELS / "bad" / bad, store=None)
    sjg = tmp_path / "broken.sjg"
    sjg.write_text("graph g(N) {\n  input x: [N, 4\n}\n")
    with pytest.raises(shapejit.ModelError, match=r"broken.sjg:3:1: expected"):
        shapejit.Engine(sjg, store=None)


def test_bad_options(ffn):
    with pytest.raises(shapejit.InvalidArgumentError, match="ladder|nonsense"):
        shapejit.Engine(ffn, ladder="nonsense", store=None)
    with pytest.raises(shapejit.Error, match="teapot"):
        shapejit.Engine(ffn, backend="teapot", store=None)
    with pytest.raises(shapejit.InvalidArgumentError, match="threads"):
        shapejit.Engine(ffn, threads=-1, store=None)
    with pytest.raises(shapejit.InvalidArgumentError, match="dynamic"):
        shapejit.Engine(ffn, dynamic=3, store=None)
    with pytest.raises(TypeError):
        shapejit.Engine(ffn, dims=5, store=None)


def test_onnx_dim_options_refused_for_sjg(ffn):
    # a .sjg graph declares its own dims: the ONNX options used to be
    # accepted and ignored (issue 29 item 17)
    # (a load's error is a ModelError, as the ONNX dim errors are)
    with pytest.raises(shapejit.ModelError, match=r"dims= \('batch'\) is for ONNX models"):
        shapejit.Engine(ffn, dims={"batch": 2}, store=None)
    with pytest.raises(shapejit.ModelError, match=r"dynamic= \('N'\) is for ONNX models"):
        shapejit.Engine(ffn, dynamic="N", store=None)
    with pytest.raises(shapejit.ModelError, match=r"dynamic=\(input, axis\) \('x'\)"):
        shapejit.Engine(ffn, dynamic=("x", 0), store=None)


def test_cpu_without_64bit_mode_refused(ffn):
    # LLVM aborted the interpreter compiling for a 32-bit CPU (issue 29 item 2)
    with pytest.raises(shapejit.InvalidArgumentError, match="CPU 'i386' has no 64-bit mode"):
        shapejit.Engine(ffn, backend="host", cpu="i386", store=None).run(x=rand((3, 64)))


def test_unusable_store(ffn, tmp_path):
    not_a_dir = tmp_path / "plain-file"
    not_a_dir.write_text("x")
    with pytest.raises(shapejit.StoreError, match="plain-file"):
        shapejit.Engine(ffn, store=not_a_dir / "store.db")
    bad = tmp_path / "garbage.db"
    bad.write_bytes(b"this is not a store" * 100)
    with pytest.raises(shapejit.StoreError, match="garbage.db"):
        shapejit.Engine(ffn, store=bad)
    with pytest.raises(shapejit.StoreError):
        shapejit.Engine(ffn, store=tmp_path)  # a folder


def test_unusable_default_store_warns_and_serves(ffn, tmp_path, monkeypatch):
    bad = tmp_path / "garbage.db"
    bad.write_bytes(b"this is not a store" * 100)
    monkeypatch.setenv("SHAPEJIT_STORE", str(bad))
    with pytest.warns(RuntimeWarning, match="garbage.db"):
        e = shapejit.Engine(ffn, ladder="list:4")
    with e:
        assert e.run({"x": rand((2, 64))})["y"].shape == (2, 64)


def test_remote_tier(ffn):
    with pytest.raises(shapejit.RemoteError, match="scheme .ftp."):
        shapejit.Engine(ffn, store=None, remote="ftp://x")
    with pytest.raises(shapejit.InvalidArgumentError, match="remote_secret"):
        shapejit.Engine(ffn, store=None, remote_secret=b"k")
    # The fleet tier is best-effort (the library's design): an unreachable
    # Redis (port 1: connection refused) is counted, and serving goes on.
    with shapejit.Engine(ffn, ladder="list:4", store=None, remote="redis://127.0.0.1:1") as e:
        assert e.run({"x": rand((2, 64))})["y"].shape == (2, 64)
        remote = e.stats()["remote"]
        assert remote["url"].startswith("redis://127.0.0.1:1")
        assert remote["errors"] + remote["timeouts"] + remote["backoff_skips"] >= 1
        assert e.stats()["remote_hits"] == 0


def test_errors_leave_the_engine_usable(engine):
    for bad in ({}, {"x": rand((2, 3))}, {"x": rand((2, 64), np.float64)}):
        with pytest.raises(shapejit.Error):
            engine.run(bad)
    assert engine.run({"x": rand((2, 64))})["y"].shape == (2, 64)
    assert engine.stats()["run_failures"] >= 2


def test_dims_tie_to_the_dynamic_dim_only():
    """A dims value that is a str ties that dim to the dynamic one, spelled
    [K*]DYNAMIC[+C]; anything else is refused naming the dim and the form."""
    step = REAL_MODELS / "gpt2_step_torchscript" / "model.onnx"
    with pytest.raises(shapejit.InvalidArgumentError, match=r"dims\['total'\] is 'pst\+1'.*\[K\*\]past\[\+C\]"):
        shapejit.Engine(step, store=None, dynamic="past", dims={"total": "pst+1"})
    e = shapejit.Engine(step, store=None, dynamic="past", dims={"total": "past+1"})
    assert [i for i in e.inputs if i[0] == "attention_mask"][0][2] == (1, "past+1")
