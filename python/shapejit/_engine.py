"""shapejit.Engine: argument handling around the C core (_shapejit._Engine).

run() is the C method itself; what is here runs once per engine (the
default store path rule, dims/dynamic spelling) or once per precompile
(progress bars).
"""
import os
import warnings
from typing import NamedTuple

from . import _shapejit

_DEFAULT_STORE = object()


class Bucket(NamedTuple):
    """Bucket i holds sizes lo..hi and is compiled at hi; ready once loaded."""

    lo: int
    hi: int
    ready: bool


class TensorInfo(NamedTuple):
    """A model input or output: shape has None for the dynamic dim."""

    name: str
    dtype: str
    shape: tuple


def default_store_path(environ=None):
    """The store file an Engine uses when store= is not given.

    $SHAPEJIT_STORE, else $XDG_CACHE_HOME/shapejit/store.db, else
    $HOME/.cache/shapejit/store.db; None when none of them is set (nothing
    then persists). The library applies the rule; this reads the environment.
    """
    env = os.environ if environ is None else environ
    return _shapejit.default_store_path(
        env.get("SHAPEJIT_STORE") or None, env.get("XDG_CACHE_HOME") or None,
        env.get("HOME") or None)


def _dims_pairs(dims):
    """(name, size) pairs; a str value ties the dim to the dynamic one
    ("past+1"), which the library parses."""
    if dims is None:
        return None
    items = dims.items() if isinstance(dims, dict) else dims
    return [(str(k), v if isinstance(v, str) else int(v)) for k, v in items]


def _count(name, value):
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _shapejit.InvalidArgumentError(
            f"{name} is {value!r}: a whole number >= 0 (None = the library's default)")
    return value


class Engine(_shapejit._Engine):
    """A model, its bucket ladder, a store and a backend behind run().

    Engine(model, ladder=None, store=<default>, backend="host",
           dynamic=None, dims=None, threads=None, remote=None, *, workers=None,
           remote_secret=None, remote_read_only=False,
           one_off_out_of_range=False, cpu=None, gpu_emit=None, arch=None,
           tune=False, tune_budget_ms=None)

    model: a .onnx or .sjg file. ladder: a spec ("pow2:1:1024",
    "geo:1:1000:1.25", "list:16,48,128"); None = the library's default
    (SJ_ENGINE_DEFAULT_LADDER, pow2:1:65536). store: omitted = default_store_path() (folders
    are created; if the file cannot be used the engine warns and keeps
    its artifacts in memory), None = nothing persists, or a path (which must
    be usable: StoreError otherwise). backend: "host",
    "interp" or "cuda". dynamic: which dim is the dynamic one, either a
    dim_param name ("seq") or (input_name, axis) for exports without one.
    dims: fixed dim_params, {"batch": 1}, or tied to the dynamic one,
    {"total": "past+1"}. threads: kernel threads per run.
    remote: redis://[:PASSWORD@]HOST[:PORT][/DB] of the fleet tier.
    tune: host; each bucket compiled times the schedules that differ and
    keeps the fastest, within tune_budget_ms per bucket (default 200); tuned
    code has store keys of its own, so a tuned precompile is loaded by an
    engine made with tune=True and compiles nothing.

    run() takes C-contiguous arrays of the model's dtype without copying;
    strided arrays are copied once; other dtypes raise DtypeError (never cast).
    Outputs are new arrays that own their memory. The GIL is released while
    compiling and running, and one engine may be used from many threads.
    """

    def __init__(self, model, ladder=None, store=_DEFAULT_STORE, backend="host",
                 dynamic=None, dims=None, threads=None, remote=None, *, workers=None,
                 remote_secret=None, remote_read_only=False, one_off_out_of_range=False,
                 cpu=None, gpu_emit=None, arch=None, tune=False, tune_budget_ms=None):
        model = os.fspath(model)
        fallback = store is _DEFAULT_STORE
        if store is _DEFAULT_STORE:
            store = default_store_path()
        elif store is not None:
            store = os.fspath(store)
        dyn_name = dyn_input = None
        dyn_axis = 0
        if isinstance(dynamic, str):
            dyn_name = dynamic
        elif dynamic is not None:
            try:
                dyn_input, dyn_axis = dynamic
            except (TypeError, ValueError):
                raise _shapejit.InvalidArgumentError(
                    f"dynamic is {dynamic!r}: a dim_param name or (input_name, axis)") from None
            dyn_input, dyn_axis = str(dyn_input), int(dyn_axis)
        self.model_path = model
        self.store_path = store
        super().__init__(
            model, ladder=ladder, store=store, backend=backend, dynamic_name=dyn_name,
            dynamic_input=dyn_input, dynamic_axis=dyn_axis, dims=_dims_pairs(dims),
            threads=_count("threads", threads), workers=_count("workers", workers),
            remote=remote, remote_secret=remote_secret, remote_read_only=bool(remote_read_only),
            one_off_out_of_range=bool(one_off_out_of_range), cpu=cpu, gpu_emit=gpu_emit,
            arch=arch, store_fallback_to_memory=fallback, tune=bool(tune),
            # the library says what range it takes; a huge value reaches it as INT_MAX
            tune_budget_ms=-1 if tune_budget_ms is None else min(_count("tune_budget_ms", tune_budget_ms),
                                                                 2**31 - 1))
        if self._warning:
            # A default store the user never named (e.g. a read-only home)
            # must not stop serving; it is said once, and nothing persists.
            warnings.warn(f"shapejit: {self._warning}", RuntimeWarning, stacklevel=2)

    def precompile(self, jobs=None, progress=None):
        """Make every bucket ready (compiled, or loaded from the store).

        jobs: compile threads (None = the CPU count). progress: None, a
        callable(done, total, extent) (called from compile threads, holding
        the GIL; an exception it raises is re-raised when precompile ends),
        or True for a tqdm bar (a line on stderr when tqdm is missing).
        """
        bar = None
        if progress is True:
            bar = progress = _progress_bar()
        try:
            self._precompile(_count("jobs", jobs), progress)
        finally:
            if bar is not None:
                bar.close()

    @property
    def buckets(self):
        """[Bucket(lo, hi, ready)] in ladder order."""
        return [Bucket(*b) for b in self._buckets()]

    @property
    def inputs(self):
        """[TensorInfo(name, dtype, shape)] of the model's inputs."""
        return [TensorInfo(*d) for d in self._io()[1]]

    @property
    def outputs(self):
        """[TensorInfo(name, dtype, shape)] of the model's outputs."""
        return [TensorInfo(*d) for d in self._io()[2]]

    @property
    def symbol(self):
        """The dynamic dim's name (e.g. "N", "batch"), None for a static model."""
        return self._io()[0]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self.closed else f"store={self.store_path!r}"
        return f"<shapejit.Engine {self.model_path!r} {state}>"


class _TextProgress:
    """The progress=True fallback without tqdm: one line on stderr, rewritten."""

    def __call__(self, done, total, extent):
        import sys
        sys.stderr.write(f"\rshapejit: {done}/{total} buckets (last: {extent})")
        sys.stderr.flush()
        self.shown = True

    def close(self):
        if getattr(self, "shown", False):
            import sys
            sys.stderr.write("\n")


class _TqdmProgress:
    def __init__(self, tqdm):
        self._tqdm = tqdm
        self._bar = None

    def __call__(self, done, total, extent):
        if self._bar is None:
            self._bar = self._tqdm(total=total, desc="shapejit precompile", unit="bucket")
        self._bar.update(done - self._bar.n)
        self._bar.set_postfix(extent=extent, refresh=False)

    def close(self):
        if self._bar is not None:
            self._bar.close()


def _progress_bar():
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _TextProgress()
    return _TqdmProgress(tqdm)
