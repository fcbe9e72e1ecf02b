"""shapejit.Engine: results, memory ownership, buckets, stats, precompile."""
import numpy as np
import pytest

import shapejit
from conftest import MODELS, REAL_MODELS, rand


def test_run_matches_the_reference_interpreter(ffn):
    with shapejit.Engine(ffn, ladder="list:4,16,64", store=None) as host, \
            shapejit.Engine(ffn, ladder="list:4,16,64", store=None, backend="interp") as ref:
        for n in (1, 3, 4, 9, 64):
            x = rand((n, 64), seed=n)
            got = host.run({"x": x})
            want = ref.run({"x": x})
            assert list(got) == ["y"]
            assert got["y"].shape == (n, 64) and got["y"].dtype == np.float32
            np.testing.assert_allclose(got["y"], want["y"], rtol=1e-4, atol=1e-5)


def test_outputs_own_their_memory(engine):
    x = rand((5, 64))
    a = engine.run({"x": x})["y"]
    b = engine.run({"x": x})["y"]
    assert a.flags.c_contiguous and a.flags.writeable
    assert not np.shares_memory(a, b)
    a[:] = 0  # writing one result leaves the next alone
    np.testing.assert_array_equal(b, engine.run({"x": x})["y"])


def test_outputs_outlive_the_engine(ffn):
    e = shapejit.Engine(ffn, ladder="list:8", store=None)
    y = e.run({"x": rand((8, 64))})["y"]
    copy = y.copy()
    e.close()
    del e
    np.testing.assert_array_equal(y, copy)


def test_inputs_are_not_modified_and_read_only_inputs_work(engine):
    x = rand((7, 64))
    before = x.copy()
    x.flags.writeable = False
    engine.run({"x": x})
    np.testing.assert_array_equal(x, before)


def test_contiguous_inputs_are_not_copied(engine):
    # The binding's only input allocation is the C-order copy of a strided
    # buffer (PyMem_RawMalloc, which tracemalloc sees); outputs come from the
    # library's allocator, which it does not.
    import tracemalloc
    x = rand((64, 64))
    engine.run({"x": x})

    def peak(arr):
        tracemalloc.start()
        try:
            engine.run({"x": arr})
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert peak(x) < x.nbytes // 4
    assert peak(np.asfortranarray(x)) >= x.nbytes


def test_strided_inputs_are_checked_before_the_copy(engine):
    # A broadcast view of 2**20 rows is 4 bytes of data and 256 MiB in C
    # order: its size is outside the ladder, and that is found before the
    # copy (issue 29 item 16: the copy came first, seconds and a gigabyte).
    # tracemalloc sees the binding's copy (PyMem_RawMalloc), as above.
    import tracemalloc
    wide = np.broadcast_to(np.ones(64, np.float32), (2**20, 64))
    assert not wide.flags.c_contiguous
    tracemalloc.start()
    try:
        with pytest.raises(shapejit.OutOfRangeError, match="1048576"):
            engine.run({"x": wide})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < (1 << 20)
    # a wrong fixed dim is found first as well
    with pytest.raises(shapejit.ShapeError, match="dim 1"):
        engine.run({"x": np.broadcast_to(np.ones(63, np.float32), (8, 63))})


@pytest.mark.parametrize("make", [
    lambda x: np.asfortranarray(x),
    lambda x: np.repeat(x, 2, axis=0)[::2],
    lambda x: np.ascontiguousarray(x.T).T,
    lambda x: np.pad(x, ((0, 0), (0, 8)))[:, :64],
], ids=["fortran", "row-stride", "transposed", "column-slice"])
def test_non_contiguous_inputs_are_copied(engine, make):
    x = rand((6, 64))
    strided = make(x)
    assert not strided.flags.c_contiguous
    np.testing.assert_array_equal(engine.run({"x": strided})["y"], engine.run({"x": x})["y"])


def test_other_buffers_than_numpy(engine):
    x = rand((2, 64))
    want = engine.run({"x": x})["y"]
    np.testing.assert_array_equal(engine.run({"x": memoryview(x)})["y"], want)


def test_buckets_and_stats(ffn, tmp_path):
    with shapejit.Engine(ffn, ladder="list:4,16,64", store=tmp_path / "s.db") as e:
        assert e.buckets == [shapejit.Bucket(1, 4, False), shapejit.Bucket(5, 16, False),
                             shapejit.Bucket(17, 64, False)]
        e.run({"x": rand((3, 64))})
        e.run({"x": rand((2, 64))})
        st = e.stats()
        assert st["runs"] == 2 and st["compiles"] == 1 and st["memory_hits"] == 1
        assert st["buckets"] == 3 and st["buckets_ready"] == 1
        assert st["compile_ms"] > 0
        assert [b.ready for b in e.buckets] == [True, False, False]
        assert set(st) >= {"run_failures", "store_hits", "remote_hits", "corrupt",
                           "store_errors", "one_offs"}


def test_stats_weight_bytes(ffn, tmp_path):
    """weight_bytes and, of them, weight_mapped_bytes: 0 before a bucket loads;
    an .sjg's weights are allocated, an ONNX model's external-data file is
    read in place (the C engine's figures, as the CLI's --stats prints them)."""
    with shapejit.Engine(ffn, ladder="list:4,16,64", store=None) as e:
        st = e.stats()
        assert st["weight_bytes"] == 0 and st["weight_mapped_bytes"] == 0
        e.run({"x": rand((3, 64))})
        st = e.stats()
        assert st["weight_bytes"] == (64 * 256 * 2 + 256 + 64 * 3) * 4  # w1, w2, b1, b2, ln
        assert st["weight_mapped_bytes"] == 0
    bert = REAL_MODELS / "bert_torchscript"
    data_bytes = (bert / "model.onnx.data").stat().st_size
    with shapejit.Engine(str(bert / "model.onnx"), ladder="list:16", store=tmp_path / "s.db",
                         dynamic="seq", dims={"batch": 1}) as e:
        e.run({"input_ids": np.zeros((1, 5), np.int64),
               "attention_mask": np.ones((1, 5), np.int64)})
        st = e.stats()
        assert 0 < st["weight_mapped_bytes"] <= data_bytes
        assert st["weight_mapped_bytes"] < st["weight_bytes"]


def test_describes_inputs_and_outputs(engine):
    assert engine.inputs == [shapejit.TensorInfo("x", "float32", (None, 64))]
    assert engine.outputs == [shapejit.TensorInfo("y", "float32", (None, 64))]
    assert engine.symbol == "N"


def test_precompile_with_progress_callback(ffn):
    seen = []
    with shapejit.Engine(ffn, ladder="list:4,16,64", store=None) as e:
        e.precompile(jobs=2, progress=lambda done, total, extent: seen.append((done, total, extent)))
        assert all(b.ready for b in e.buckets)
        assert e.stats()["compiles"] == 3
    assert sorted(d for d, _, _ in seen) == [1, 2, 3]
    assert {t for _, t, _ in seen} == {3}
    assert sorted(x for _, _, x in seen) == [4, 16, 64]


def test_precompile_reraises_the_callback_exception(ffn):
    def boom(done, total, extent):
        raise RuntimeError("stop at %d" % done)
    with shapejit.Engine(ffn, ladder="list:4,16", store=None) as e:
        with pytest.raises(RuntimeError, match="stop at"):
            e.precompile(progress=boom)
        assert all(b.ready for b in e.buckets)  # the compile itself went on


def test_close_from_a_progress_callback_is_refused(ffn):
    with shapejit.Engine(ffn, ladder="list:4", store=None) as e:
        with pytest.raises(shapejit.StateError, match="progress callback"):
            e.precompile(progress=lambda *a: e.close())
        assert not e.closed


def test_precompile_progress_true(ffn, capsys):
    with shapejit.Engine(ffn, ladder="list:4,16", store=None) as e:
        e.precompile(jobs=1, progress=True)
    err = capsys.readouterr().err
    assert "2/2" in err  # tqdm's bar or the plain line, both show done/total


def test_context_manager_closes(ffn):
    with shapejit.Engine(ffn, ladder="list:4", store=None) as e:
        assert not e.closed
    assert e.closed
    e.close()  # twice is harmless
    with pytest.raises(shapejit.ClosedError, match="closed"):
        e.run({"x": rand((1, 64))})
    for call in (e.stats, e.precompile, lambda: e.buckets, lambda: e.inputs):
        with pytest.raises(shapejit.ClosedError):
            call()


def test_other_example_models():
    for name in ("mlp.sjg", "attention.sjg"):
        with shapejit.Engine(MODELS / name, ladder="list:8", store=None) as e:
            feed = {}
            for info in e.inputs:
                shape = tuple(5 if d is None else d for d in info.shape)
                feed[info.name] = rand(shape)
            out = e.run(feed)
            assert [o.name for o in e.outputs] == list(out)
            for info in e.outputs:
                assert out[info.name].shape == tuple(5 if d is None else d for d in info.shape)
                assert np.isfinite(out[info.name]).all()


def test_tuned_precompile_is_loaded_by_a_tuned_engine(tmp_path):
    model, store = str(MODELS / "attention.sjg"), str(tmp_path / "tuned.db")
    with shapejit.Engine(model, ladder="list:8,64", store=store, tune=True, tune_budget_ms=10) as e:
        e.precompile(jobs=1)
        assert e.stats()["compiles"] == 2
        x = rand((40, 32), seed=3)
        tuned = e.run({"x": x})
    with shapejit.Engine(model, ladder="list:8,64", store=None, backend="interp") as ref:
        np.testing.assert_allclose(tuned["out"], ref.run({"x": x})["out"], rtol=1e-4, atol=1e-5)
    with shapejit.Engine(model, ladder="list:8,64", store=store, tune=True) as warm:
        warm.precompile(jobs=1)
        assert warm.stats()["compiles"] == 0


def test_tuning_budget_is_checked():
    with pytest.raises(shapejit.InvalidArgumentError, match="tuning budget 0 ms"):
        shapejit.Engine(str(MODELS / "attention.sjg"), store=None, tune=True, tune_budget_ms=0)
