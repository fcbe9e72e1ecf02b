"""10,000 failing calls (and 10,000 good ones) keep RSS flat: every error
path releases its buffers, copies and exception state."""
import gc

import numpy as np

import shapejit
from conftest import rand, rss_bytes


def _loop(engine, feeds, count):
    for i in range(count):
        try:
            engine.run(feeds[i % len(feeds)])
        except shapejit.Error:
            pass


def _growth(engine, feeds, count=10_000):
    _loop(engine, feeds, 1_000)  # warm: allocator pools, first-use caches
    gc.collect()
    before = rss_bytes()
    _loop(engine, feeds, count)
    gc.collect()
    return rss_bytes() - before


def test_failing_calls_keep_rss_flat(engine):
    x = rand((3, 64))
    bad = [
        {},                                         # missing input (library)
        {"x": x, "extra": x},                       # extra input (library)
        {"x": rand((3, 65))},                       # wrong shape (library)
        {"x": rand((65, 64))},                      # outside the ladder (library)
        {"x": x.astype(np.float64)},                # wrong dtype (refused here)
        {"x": np.asfortranarray(rand((3, 63)))},    # copied, then wrong shape
        {"x": [1.0, 2.0]},                          # not an array
    ]
    for feed in bad:  # every one of them fails
        try:
            engine.run(feed)
            raise AssertionError(f"no error for {feed!r}")
        except shapejit.Error:
            pass
    grew = _growth(engine, bad)
    assert grew < 2 * 1024 * 1024, f"RSS grew {grew} bytes over 10,000 failing calls"
    assert engine.stats()["run_failures"] >= 10_000 * 5 // 7


def test_successful_calls_keep_rss_flat(engine):
    feeds = [{"x": rand((n, 64))} for n in (1, 4, 13, 64)]
    feeds.append({"x": np.asfortranarray(rand((9, 64)))})
    grew = _growth(engine, feeds)
    assert grew < 2 * 1024 * 1024, f"RSS grew {grew} bytes over 10,000 runs"


def test_failing_opens_keep_rss_flat(tmp_path, ffn):
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 10)

    def opens(count):
        for _ in range(count):
            for kw in ({"model": bad}, {"model": ffn, "ladder": "list:"}):
                try:
                    shapejit.Engine(store=None, **kw)
                except shapejit.Error:
                    pass

    opens(100)
    gc.collect()
    before = rss_bytes()
    opens(1_000)
    gc.collect()
    assert rss_bytes() - before < 2 * 1024 * 1024


def test_engines_do_not_run_out_of_thread_keys(ffn):
    """An engine used to hold a context of its own, and a context holds a
    pthread key (1024 per process) until it is freed: about 945 engines in,
    the next open failed with a bare MemoryError(''), closed engines still
    referenced keeping theirs. Engines share the process's context now, so
    1,100 closed-but-referenced engines leave room for live ones."""
    closed = []
    for _ in range(1_100):
        e = shapejit.Engine(ffn, ladder="list:4", store=None)
        e.close()
        closed.append(e)
    live = [shapejit.Engine(ffn, ladder="list:4", store=None) for _ in range(8)]
    x = rand((3, 64))
    want = live[0].run({"x": x})["y"]
    for e in live[1:]:
        np.testing.assert_array_equal(e.run({"x": x})["y"], want)
    for e in live:
        e.close()
    try:
        closed[0].run({"x": x})
        raise AssertionError("a closed engine ran")
    except shapejit.ClosedError:
        pass
