"""The store: warm start across processes, the default store path rule."""
import json
import os
import subprocess
import sys

import shapejit

SERVE = r"""
import json, sys
import numpy as np
import shapejit
with shapejit.Engine(sys.argv[1], ladder="list:4,16,64", store=sys.argv[2]) as e:
    for n in (1, 5, 30, 64, 2):
        y = e.run({"x": np.full((n, 64), 0.5, np.float32)})["y"]
    print(json.dumps({"stats": e.stats(), "y": y.tolist()}))
"""


def _serve(ffn, store):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", SERVE, ffn, str(store)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_warm_start_in_a_second_process(ffn, tmp_path):
    store = tmp_path / "store.db"
    first = _serve(ffn, store)
    assert first["stats"]["compiles"] == 3 and first["stats"]["store_hits"] == 0
    second = _serve(ffn, store)
    assert second["stats"]["compiles"] == 0, second["stats"]
    assert second["stats"]["store_hits"] == 3
    assert second["y"] == first["y"]


def test_precompile_then_serve_compiles_nothing(ffn, tmp_path):
    store = tmp_path / "store.db"
    with shapejit.Engine(ffn, ladder="list:4,16,64", store=store) as e:
        e.precompile()
        assert e.stats()["compiles"] == 3
    assert _serve(ffn, store)["stats"]["compiles"] == 0


def test_default_store_path_rule():
    rule = shapejit.default_store_path
    assert rule({"SHAPEJIT_STORE": "/s.db", "XDG_CACHE_HOME": "/x", "HOME": "/h"}) == "/s.db"
    assert rule({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == "/x/shapejit/store.db"
    assert rule({"SHAPEJIT_STORE": "", "HOME": "/h"}) == "/h/.cache/shapejit/store.db"
    assert rule({}) is None


def test_engine_uses_the_default_store(ffn, tmp_path, monkeypatch):
    monkeypatch.delenv("SHAPEJIT_STORE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with shapejit.Engine(ffn, ladder="list:4") as e:
        assert e.store_path == str(tmp_path / "cache" / "shapejit" / "store.db")
        e.run({"x": __import__("numpy").zeros((1, 64), "float32")})
    assert os.path.exists(e.store_path)
    with shapejit.Engine(ffn, ladder="list:4", store=None) as e:
        assert e.store_path is None
