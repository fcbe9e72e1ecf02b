"""Shared fixtures. The package under test is the installed one (the venv of
scripts/test-python.sh), never python/shapejit from the source tree, which
has no compiled module."""
import os
import pathlib

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
MODELS = REPO / "examples" / "models"
ONNX_MODELS = REPO / "tests" / "data" / "models"
REAL_MODELS = REPO / "tests" / "data" / "real_models"


@pytest.fixture(autouse=True)
def _private_store(tmp_path, monkeypatch):
    """No test writes the user's ~/.cache: the default store is per test."""
    monkeypatch.setenv("SHAPEJIT_STORE", str(tmp_path / "default-store.db"))


@pytest.fixture
def ffn():
    return str(MODELS / "ffn.sjg")


@pytest.fixture
def engine(ffn):
    import shapejit
    with shapejit.Engine(ffn, ladder="list:4,16,64", store=None) as e:
        yield e


def rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
