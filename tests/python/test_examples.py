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


def run(cmd):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd="/", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def losses(out):
    return [line.split("loss")[1].split("(")[0].strip() for line in out.splitlines() if line.lstrip().startswith("step")]


def test_train_ragged_py_matches_the_c_program():
    """The Python twin tokenizes, shuffles, initialises and updates as
    examples/train_ragged.c does: the same losses, step by step (printed to
    4 decimals), and the loss falls."""
    build = os.environ.get("JAG_BUILD_DIR", os.path.join(ROOT, "build"))
    c_prog = os.path.join(build, "examples", "train_ragged")
    assert os.path.exists(c_prog), "build the C examples first (make test does): " + c_prog
    args = ["--steps", "12", "--batch", "16"]  # prints steps 1, 10 and 12
    py_out = run([sys.executable, os.path.join(ROOT, "examples", "train_ragged.py")] + args)
    c_out = run([c_prog] + args)
    assert py_out.splitlines()[0] == c_out.splitlines()[0]  # the same corpus
    assert losses(py_out) == losses(c_out) and len(losses(py_out)) == 3
    assert py_out.splitlines()[-1] == c_out.splitlines()[-1] and "it learns" in py_out


def test_train_ragged_py_bad_data(tmp_path):
    script = os.path.join(ROOT, "examples", "train_ragged.py")
    r = subprocess.run([sys.executable, script, "--data", str(tmp_path / "missing")], capture_output=True, text=True)
    assert r.returncode != 0 and "cannot open" in r.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    r = subprocess.run([sys.executable, script, "--data", str(empty)], capture_output=True, text=True)
    assert r.returncode != 0 and "no documents with words" in r.stderr
