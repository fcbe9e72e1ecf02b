"""python/examples/serve.py runs end to end and shows the warm start."""
import os
import subprocess
import sys

from conftest import REPO


def test_serve_example(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, str(REPO / "python" / "examples" / "serve.py"),
                          "--store", str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert "first process: 9 buckets compiled" in out.stdout
    assert "second process: 0 compiled, 9 loaded from the store" in out.stdout
