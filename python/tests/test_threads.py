"""One engine shared by many Python threads: the GIL is released while a
run executes, results are the single-threaded ones, close() waits for runs."""
import threading

import numpy as np
import pytest

import shapejit
from conftest import rand


def test_threads_share_one_engine(ffn):
    sizes = [1, 3, 4, 7, 16, 20, 33, 64]
    inputs = {n: rand((n, 64), seed=n) for n in sizes}
    with shapejit.Engine(ffn, ladder="list:4,16,64", store=None) as e:
        want = {n: e.run({"x": x})["y"] for n, x in inputs.items()}
        errors = []

        def worker(k):
            try:
                for i in range(40):
                    n = sizes[(k + i) % len(sizes)]
                    np.testing.assert_array_equal(e.run({"x": inputs[n]})["y"], want[n])
            except Exception as exc:  # reported below, on the main thread
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        st = e.stats()
        assert st["runs"] == len(sizes) + 8 * 40 and st["compiles"] == 3


def test_first_runs_race_to_compile(ffn):
    # Every thread asks for the same cold bucket at once: one compile.
    with shapejit.Engine(ffn, ladder="list:64", store=None) as e:
        barrier = threading.Barrier(6)
        out = [None] * 6

        def worker(k):
            barrier.wait()
            out[k] = e.run({"x": rand((50, 64))})["y"]

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(np.array_equal(o, out[0]) for o in out)
        assert e.stats()["compiles"] == 1


def test_gil_is_released_while_running(ffn):
    # While another thread is inside run() (here: compiling the first
    # bucket, hundreds of ms), this thread keeps executing Python.
    with shapejit.Engine(ffn, ladder="list:64", store=None) as e:
        started, ticks = threading.Event(), []
        t = threading.Thread(target=lambda: (started.set(), e.run({"x": rand((64, 64))})))
        t.start()
        started.wait()
        while t.is_alive():
            ticks.append(1)
        t.join()
        assert len(ticks) > 1000


def test_close_while_other_threads_run(ffn):
    e = shapejit.Engine(ffn, ladder="list:4", store=None)
    x = rand((2, 64))
    e.run({"x": x})
    outcomes, stop = [], threading.Event()

    def worker():
        while not stop.is_set():
            try:
                e.run({"x": x})
            except shapejit.ClosedError:
                outcomes.append("closed")
                return

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    e.close()
    for t in threads:
        t.join(timeout=30)
    stop.set()
    assert outcomes == ["closed"] * 4
    with pytest.raises(shapejit.ClosedError):
        e.run({"x": x})
