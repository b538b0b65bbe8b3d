"""examples/seed_walkthrough.py runs to the end in a fresh interpreter: the
seed's assertions hold in jag, step by step."""
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def test_seed_walkthrough_runs():
    script = os.path.join(ROOT, "examples", "seed_walkthrough.py")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    r = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=300, cwd="/", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    for step in ("0. a strided nested tensor", "1. pointwise", "2. bmm", "3. a jagged", "4a. a custom op",
                 "4b. autograd", "5. a Meta kernel"):
        assert step in out, out
    assert "nt.shape = (3, 2, j0)" in out
    assert "nt.grad.offsets == nt.offsets: [0, 2, 6, 9]" in out
    assert out.rstrip().endswith("all steps passed")
