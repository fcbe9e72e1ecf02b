"""shapejit.InferenceSession: onnxruntime.InferenceSession's call shape over
an Engine, so serving code switches with one import line:

    import shapejit as ort        # was: import onnxruntime as ort
    sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    (y,) = sess.run(None, {name: x})
"""
import os

from . import _shapejit
from ._engine import Engine

_ORT_TYPES = {"float32": "tensor(float)", "int64": "tensor(int64)",
              "int32": "tensor(int32)", "bool": "tensor(bool)"}
_PROVIDERS = {"CPUExecutionProvider": "host", "CUDAExecutionProvider": "cuda"}


class NodeArg:
    """An input or output as onnxruntime describes it: .name, .type
    ('tensor(float)'), .shape (ints, the dynamic dim by its name)."""

    __slots__ = ("name", "type", "shape")

    def __init__(self, name, type, shape):
        self.name, self.type, self.shape = name, type, shape

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


def _backend(providers):
    for p in providers or ():
        name = p[0] if isinstance(p, (tuple, list)) else p
        if name in _PROVIDERS:
            return _PROVIDERS[name], name
    if providers:
        raise _shapejit.InvalidArgumentError(
            f"providers {list(providers)!r}: shapejit runs CPUExecutionProvider (host) "
            "or CUDAExecutionProvider (cuda)")
    return "host", "CPUExecutionProvider"


class InferenceSession:
    """InferenceSession(path, sess_options=None, providers=None, **engine_options)

    path: an ONNX (or .sjg) file; bytes are not accepted (shapejit caches by
    file). sess_options, provider_options and run_options are accepted for
    onnxruntime's call shape and ignored (none of their settings has a
    shapejit counterpart). providers picks the backend ("CPUExecutionProvider" -> host,
    "CUDAExecutionProvider" -> cuda). Other keyword arguments go to Engine
    (ladder, store, dynamic, dims, threads, remote, ...).
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None,
                 **engine_options):
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            raise _shapejit.InvalidArgumentError(
                "InferenceSession: pass the model's file path; shapejit does not load "
                "models from bytes")
        backend, self._provider = _backend(providers)
        engine_options.setdefault("backend", backend)
        self._engine = Engine(os.fspath(path_or_bytes), **engine_options)
        sym, ins, outs = self._engine._io()
        self._inputs = [self._node(sym, d) for d in ins]
        self._outputs = [self._node(sym, d) for d in outs]
        self._output_names = [o.name for o in self._outputs]

    @staticmethod
    def _node(sym, desc):
        name, dtype, shape = desc
        return NodeArg(name, _ORT_TYPES[dtype], [sym if d is None else d for d in shape])

    @property
    def engine(self):
        """The shapejit.Engine underneath (stats(), buckets, precompile())."""
        return self._engine

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_providers(self):
        return [self._provider]

    def run(self, output_names, input_feed, run_options=None):
        """Returns a list of numpy arrays: the outputs named (None or [] = all,
        in the model's order)."""
        result = self._engine.run(input_feed)
        if not output_names:
            return [result[n] for n in self._output_names]
        out = []
        for n in output_names:
            if n not in result:
                raise _shapejit.NotFoundError(
                    f"output '{n}' is not an output of the model (outputs: "
                    f"{', '.join(self._output_names)})")
            out.append(result[n])
        return out
