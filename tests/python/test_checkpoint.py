"""jag.save / jag.load of checkpoints (torch.save / torch.load's role): nested
containers of tensors and plain values round-trip exactly, the file stays a
plain safetensors file, and training resumed from a checkpoint takes the
same steps, bit for bit, as training that never stopped."""
import math
import struct
from collections import OrderedDict

import numpy as np
import pytest

import jag
import jag.nn as nn
from safetensors import numpy as st_numpy


def _bits(t):
    return np.ascontiguousarray(t.detach().numpy()).tobytes()


def _same_tensor(a, b):
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    assert _bits(a) == _bits(b)


def _float_bits(x):
    return struct.pack("<d", x)


def test_nested_containers_round_trip(tmp_path):
    w = jag.randn(3, 4)
    shared = jag.arange(5, dtype=jag.int64)
    nt = jag.nested.nested_tensor([jag.randn(2, 3), jag.randn(4, 3)], layout=jag.jagged)
    floats = [0.1, 1e-300, -0.0, 1 / 3, 2.0 ** 60, math.inf, -math.inf]
    obj = {
        "z_first": 1,  # key order is kept, not sorted
        "model": OrderedDict([("layer.weight", w), ("ids", shared)]),
        "again": shared,
        "ragged": nt,
        "floats": floats,
        "nan": math.nan,
        "plain": {"s": "héllo", "none": None, "t": True, "f": False, "big": 2 ** 70, "neg": -3},
        "tup": (1, (2.5, "x"), [shared]),
        "keys": {0: "int", 1.5: "float", True: "bool", None: "none", (1, "a"): "tuple", "0": "str"},
        "empty": {"l": [], "t": (), "d": {}},
    }
    path = tmp_path / "ckpt.safetensors"
    jag.save(obj, path)
    back = jag.load(path)

    assert list(back) == list(obj)
    assert isinstance(back["model"], OrderedDict) and list(back["model"]) == ["layer.weight", "ids"]
    _same_tensor(back["model"]["layer.weight"], w)
    _same_tensor(back["model"]["ids"], shared)
    # one tensor given three times is stored once and loads as one tensor (torch.load keeps the sharing)
    assert back["again"] is back["model"]["ids"] and back["tup"][2][0] is back["again"]
    assert back["ragged"].is_nested
    for a, b in zip(back["ragged"].unbind(), nt.unbind()):
        _same_tensor(a, b)
    assert [_float_bits(x) for x in back["floats"]] == [_float_bits(x) for x in floats]
    assert all(type(x) is float for x in back["floats"])
    assert math.isnan(back["nan"])
    assert back["plain"] == obj["plain"] and type(back["plain"]["t"]) is bool and type(back["plain"]["big"]) is int
    assert back["tup"][:2] == (1, (2.5, "x")) and type(back["tup"]) is tuple and type(back["tup"][1]) is tuple
    assert list(back["keys"].items()) == list(obj["keys"].items())
    assert [type(k) for k in back["keys"]] == [int, float, bool, type(None), tuple, str]
    assert back["empty"] == {"l": [], "t": (), "d": {}} and type(back["empty"]["t"]) is tuple


def test_file_is_plain_safetensors(tmp_path):
    """Other readers see the tensors under dotted names and the structure as
    string metadata."""
    w, b = jag.randn(2, 3), jag.randn(3, dtype=jag.float64)
    path = str(tmp_path / "ckpt.safetensors")
    jag.save({"model": {"0.weight": w}, "opt": {"state": {0: {"m": b}}}, "step": 7}, path, metadata={"run": "a"})
    arrays = st_numpy.load_file(path)
    assert sorted(arrays) == ["model.0.weight", "opt.state.0.m"]
    assert arrays["model.0.weight"].tobytes() == _bits(w)
    assert arrays["opt.state.0.m"].tobytes() == _bits(b)
    obj, meta = jag.serialization.load_with_metadata(path)
    assert meta == {"run": "a"} and obj["step"] == 7


def test_names_are_made_unique(tmp_path):
    """Different paths that spell the same dotted name, or a name that is
    a nested tensor's inner name, still give distinct tensors."""
    a, b, c = jag.ones(1), jag.zeros(1), jag.full((2,), 3.0)
    nt = jag.nested.nested_tensor([jag.ones(2), jag.ones(3)], layout=jag.jagged)
    obj = {"a.b": a, "a": {"b": b}, "x.values": c, "x": nt, "": a + 1}
    path = tmp_path / "u.safetensors"
    jag.save(obj, path)
    back = jag.load(path)
    _same_tensor(back["a.b"], a)
    _same_tensor(back["a"]["b"], b)
    _same_tensor(back["x.values"], c)
    _same_tensor(back[""], a + 1)
    assert back["x"].is_nested


def test_plain_mapping_keeps_its_names_and_order(tmp_path):
    x, y = jag.randn(2), jag.randn(3)
    path = str(tmp_path / "p.safetensors")
    jag.save({"y": y, "x": x}, path)
    assert list(jag.load(path)) == ["y", "x"]
    assert sorted(st_numpy.load_file(path)) == ["x", "y"]
    # a file without jag's structure loads as a dict sorted by name
    st_numpy.save_file({"y": np.ones(2, np.float32), "x": np.zeros(1, np.float32)}, path)
    assert list(jag.load(path)) == ["x", "y"]


def test_requires_grad_round_trips(tmp_path):
    p = jag.randn(3, requires_grad=True)
    path = tmp_path / "g.safetensors"
    jag.save({"p": p, "q": jag.ones(1)}, path)
    back = jag.load(path)
    assert back["p"].requires_grad and back["p"].is_leaf and not back["q"].requires_grad
    _same_tensor(back["p"], p)


def test_save_errors(tmp_path):
    path = tmp_path / "e.safetensors"
    with pytest.raises(TypeError, match="mapping"):
        jag.save([jag.ones(1)], path)
    with pytest.raises(TypeError, match="'a.0' is a set"):
        jag.save({"a": [{1}]}, path)
    with pytest.raises(TypeError, match="key of type frozenset"):
        jag.save({"a": {frozenset(): 1}}, path)
    with pytest.raises(ValueError, match="lone surrogate"):
        jag.save({"a": "\ud800"}, path)
    assert not path.exists()


def test_load_refuses_a_bad_structure(tmp_path):
    path = str(tmp_path / "b.safetensors")
    good = {"x": np.ones(2, np.float32)}
    for structure, message in [
        ("{", "not valid JSON"),
        ('{"dict":[["k",{"tensor":"missing"}]]}', "does not hold"),
        ('{"dict":[["k",{"mystery":1}]]}', "unknown or malformed"),
        ('{"dict":[["k"]]}', "key, value"),
        ('{"dict":[[[1],1]]}', "hashable"),
        ("[" * 5000 + "]" * 5000, "JSON|deeply"),
    ]:
        st_numpy.save_file(good, path, metadata={"jag.object": structure})
        with pytest.raises(ValueError, match=message):
            jag.load(path)


def _make_model(seed):
    jag.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 3))


def _batches(n):
    g = jag.Generator()
    g.manual_seed(1234)
    return [(jag.randn(8, 6, generator=g), jag.randn(8, 3, generator=g)) for _ in range(n)]


def _train(model, opt, batches):
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(_bits(loss))
    return losses


OPTIMIZERS = {
    "adamw": lambda params: jag.optim.AdamW(params, lr=1e-2, weight_decay=0.05),
    "adam_amsgrad": lambda params: jag.optim.Adam(params, lr=3e-3, betas=(0.8, 0.99), amsgrad=True),
    "sgd_momentum": lambda params: jag.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True),
}


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_resume_matches_uninterrupted_training(tmp_path, kind):
    n_steps, k = 12, 5
    batches = _batches(n_steps)

    model = _make_model(0)
    opt = OPTIMIZERS[kind](model.parameters())
    straight = _train(model, opt, batches)
    final = [_bits(p) for p in model.parameters()]

    model = _make_model(0)
    opt = OPTIMIZERS[kind](model.parameters())
    first = _train(model, opt, batches[:k])
    path = tmp_path / "resume.safetensors"
    jag.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": k}, path)
    saved_lr = opt.param_groups[0]["lr"]
    del model, opt

    fresh = _make_model(99)  # other initial values: everything must come from the file
    fresh_opt = OPTIMIZERS[kind](fresh.parameters())
    for group in fresh_opt.param_groups:
        group["lr"] = 123.0  # load_state_dict must restore the saved learning rate
    ckpt = jag.load(path)
    fresh.load_state_dict(ckpt["model"])
    fresh_opt.load_state_dict(ckpt["optim"])
    assert ckpt["step"] == k and fresh_opt.param_groups[0]["lr"] == saved_lr
    rest = _train(fresh, fresh_opt, batches[k:])

    assert first + rest == straight
    assert [_bits(p) for p in fresh.parameters()] == final


def test_optimizer_state_dict_round_trip(tmp_path):
    """Every hyperparameter and state entry comes back with its type: betas
    a tuple, step a float32 tensor, state keyed by int."""
    model = _make_model(3)
    opt = jag.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95))
    _train(model, opt, _batches(2))
    sd = opt.state_dict()
    path = tmp_path / "o.safetensors"
    jag.save({"optim": sd}, path)
    back = jag.load(path)["optim"]
    assert back["param_groups"] == sd["param_groups"]
    assert type(back["param_groups"][0]["betas"]) is tuple
    assert list(back["state"]) == list(sd["state"]) and all(type(i) is int for i in back["state"])
    for i, entry in sd["state"].items():
        assert list(back["state"][i]) == list(entry)
        for name, t in entry.items():
            _same_tensor(back["state"][i][name], t)
