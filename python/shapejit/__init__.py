"""shapejit: JIT compile-and-cache for shape-bucketed compute graphs.

    import numpy as np, shapejit
    with shapejit.Engine("model.onnx") as eng:        # pow2 buckets, default store
        out = eng.run({"x": np.zeros((37, 64), np.float32)})
        print(out["y"].shape, eng.stats()["compiles"])

    sess = shapejit.InferenceSession("model.onnx")    # onnxruntime's call shape
    (y,) = sess.run(None, {"x": x})

Errors are shapejit.Error subclasses carrying the library's message.
"""
from ._shapejit import (  # noqa: F401  (re-exported)
    ClosedError,
    CompileError,
    DeviceError,
    DtypeError,
    Error,
    InternalError,
    MAX_RANK,
    InvalidArgumentError,
    ModelError,
    NotFoundError,
    OutOfMemoryError,
    OutOfRangeError,
    RemoteError,
    ShapeError,
    StateError,
    StoreError,
    UnsupportedError,
    library_version,
)
from ._engine import Bucket, Engine, TensorInfo, default_store_path
from ._generate import GenerateResult, greedy_generate
from ._session import InferenceSession, NodeArg

__version__ = "0.1.0"

__all__ = [
    "Bucket", "ClosedError", "CompileError", "DeviceError", "DtypeError", "Engine", "Error",
    "GenerateResult",
    "InferenceSession", "InternalError", "InvalidArgumentError", "MAX_RANK", "ModelError", "NodeArg",
    "NotFoundError", "OutOfMemoryError", "OutOfRangeError", "RemoteError", "ShapeError",
    "StateError", "StoreError", "TensorInfo", "UnsupportedError", "default_store_path",
    "greedy_generate", "library_version",
]
