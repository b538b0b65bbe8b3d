"""examples/nested_subclass_walkthrough.py runs to the end in a fresh
interpreter: PyTorch's NestedTensor wrapper-subclass prototype's assertions
hold in jag, step by step; and the training examples agree."""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def test_nested_subclass_walkthrough_runs():
    script = os.path.join(ROOT, "examples", "nested_subclass_walkthrough.py")
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


STEP = re.compile(r"^  step +(\d+)/(\d+)  epoch (\d+)  loss ([0-9.]+) \(smoothed ([0-9.]+)\)")
VALIDATION = re.compile(r"^  (epoch \d+ done|step \d+): validation loss ([0-9.]+)  accuracy ([0-9.]+)%$")
FINAL = re.compile(r"^validation accuracy ([0-9.]+)% after (\d+) steps \(majority class ([0-9.]+)%; (\d+) held-out "
                   r"documents\); training loss ([0-9.]+) -> ([0-9.]+) \(smoothed\)$")


def report(out):
    """The figures a run prints: per progress line (step, epoch, loss,
    smoothed), per validation line (when, loss, accuracy) and the final
    line's numbers; the header lines (corpus, split, batches) as text."""
    lines = out.splitlines()
    steps = [(int(m[1]), int(m[3]), float(m[4]), float(m[5])) for m in map(STEP.match, lines) if m]
    vals = [(m[1], float(m[2]), float(m[3])) for m in map(VALIDATION.match, lines) if m]
    finals = [m for m in map(FINAL.match, lines) if m]
    assert len(finals) == 1, out
    return lines[:3], steps, vals, [float(x) for x in finals[0].groups()]


def test_train_ragged_py_matches_the_c_program():
    """The Python twin tokenizes, splits, batches (TokenBudgetBatchSampler
    against the C program's reimplementation of its documented algorithm,
    across an epoch boundary: set_epoch), initialises (the jag.nn modules'
    own initialisation against the C program's draws in the same order) and
    updates (jag.optim.Adam against jag_optim_step) as
    examples/train_ragged.c does. Losses are printed to 4 decimals and must
    agree within 1e-3: both run the same kernels in the same order, so any
    difference is float32 rounding, far below that (a different batch or
    initialisation changes them by 1e-2 or more). Accuracies are counts of
    the same 73 documents, so they must be equal."""
    build = os.environ.get("JAG_BUILD_DIR", os.path.join(ROOT, "build"))
    c_prog = os.path.join(build, "examples", "train_ragged")
    assert os.path.exists(c_prog), "build the C examples first (make test does): " + c_prog
    args = ["--steps", "16", "--max-tokens", "1024"]
    py_head, py_steps, py_vals, py_final = report(run([sys.executable, os.path.join(ROOT, "examples",
                                                                                      "train_ragged.py")] + args))
    c_head, c_steps, c_vals, c_final = report(run([c_prog] + args))
    assert py_head == c_head  # the same corpus, split and number of batches
    assert [s[:2] for s in py_steps] == [s[:2] for s in c_steps] == [(1, 1), (10, 1), (16, 2)]
    for p, c in zip(py_steps, c_steps):
        assert abs(p[2] - c[2]) <= 1e-3 and abs(p[3] - c[3]) <= 1e-3, (p, c)
    assert [v[0] for v in py_vals] == [v[0] for v in c_vals] == ["epoch 1 done", "step 16"]
    for p, c in zip(py_vals, c_vals):
        assert abs(p[1] - c[1]) <= 1e-3 and p[2] == c[2], (p, c)
    accuracy, steps, majority, held_out = py_final[:4]
    assert py_final[:4] == c_final[:4] and steps == 16 and held_out == 73
    assert all(abs(p - c) <= 1e-3 for p, c in zip(py_final[4:], c_final[4:]))
    assert accuracy == py_vals[-1][2]  # the final line restates the last validation
    # it learns: the smoothed training loss falls and the held-out accuracy
    # beats always answering the most common class
    assert py_final[5] < py_final[4] and accuracy > majority


def test_train_ragged_py_bad_data(tmp_path):
    script = os.path.join(ROOT, "examples", "train_ragged.py")
    r = subprocess.run([sys.executable, script, "--data", str(tmp_path / "missing")], capture_output=True, text=True)
    assert r.returncode != 0 and "cannot open" in r.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    r = subprocess.run([sys.executable, script, "--data", str(empty)], capture_output=True, text=True)
    assert r.returncode != 0 and "no documents with words" in r.stderr
