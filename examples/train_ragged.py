"""train_ragged.py — the model of train_ragged.c, in Python with jag's
torch-like names: a small transformer classifier trained on real ragged
text, nested end to end (no padding anywhere).

Data: the fortune files of Debian's fortunes-min, or --data PATH... (a file:
one document per line; a directory: one document per file); the label of a
document is the path it came from. The tokenizer, the shuffle, the
initialisation and the optimiser are those of train_ragged.c, so both print
the same losses.

Model: embedding -> [layer_norm -> attention over the ragged dim -> +x] ->
[layer_norm -> linear -> gelu -> linear -> +x] -> mean over the ragged dim
-> linear -> cross entropy. Optimiser: Adam, written with jag ops.

    python examples/train_ragged.py [--steps N] [--batch B] [--data PATH]...
"""
import argparse
import math
import os
import re
import string
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import jag  # noqa: E402
import jag.nn.functional as F  # noqa: E402

D, H = 64, 4
DH, HID = D // H, 4 * D
FORTUNES = ["/usr/share/games/fortunes/" + f for f in ("fortunes", "literature", "riddles")]
PUNCT = string.punctuation.encode()


# ---- the corpus, tokenized as examples/corpus.h does ------------------------

class Corpus:
    def __init__(self):
        self.docs, self.labels, self.vocab = [], [], {}

    def add_words(self, line, doc):
        for w in re.split(rb"[ \t\r\n]+", line):
            w = w.strip(PUNCT).lower()
            if w:
                doc.append(self.vocab.setdefault(w, len(self.vocab)))

    def end_doc(self, doc, label):
        if doc:
            self.docs.append(list(doc))
            self.labels.append(label)
            doc.clear()

    def read(self, f, label, per_line, whole):
        doc = []
        for line in f:
            sep = not per_line and not whole and line in (b"%\n", b"%")
            if not sep:
                self.add_words(line, doc)
            if per_line or sep:
                self.end_doc(doc, label)
        self.end_doc(doc, label)


def load_corpus(paths, per_line):
    c = Corpus()
    for label, path in enumerate(paths):
        if os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                full = os.path.join(path, name)
                if not name.startswith(".") and os.path.isfile(full):
                    with open(full, "rb") as f:
                        c.read(f, label, False, True)
            continue
        try:
            with open(path, "rb") as f:
                c.read(f, label, per_line, False)
        except OSError as e:
            raise SystemExit("train: cannot open '%s': %s" % (path, e.strerror))
    if not c.docs:
        raise SystemExit("train: no documents with words in the given path%s" % ("" if len(paths) == 1 else "s"))
    return c


# ---- the model ----------------------------------------------------------------

def init_params(vocab, classes):
    s = 1.0 / math.sqrt(D)
    shapes = [
        ((vocab, D), "randn", 0.5), ((D,), "ones", None), ((D,), "zeros", None),
        ((3 * D, D), "randn", s), ((D, D), "randn", s), ((D,), "ones", None), ((D,), "zeros", None),
        ((HID, D), "randn", s), ((HID,), "zeros", None), ((D, HID), "randn", 1.0 / math.sqrt(HID)),
        ((D,), "zeros", None), ((classes, D), "randn", s), ((classes,), "zeros", None),
    ]
    params = []
    for shape, kind, std in shapes:
        p = jag.randn(*shape) * std if kind == "randn" else getattr(jag, kind)(*shape)
        params.append(p.detach().requires_grad_())
    return params


def nested_view(nt, offsets, *sizes):
    """(B, j, X) nested -> (B, j, *sizes), through its values (differentiable)."""
    return jag.nested.nested_tensor_from_jagged(nt.values().reshape(-1, *sizes), offsets)


def forward(p, ids, offsets, labels):
    emb, ln1_w, ln1_b, wqkv, wo, ln2_w, ln2_b, w1, b1, w2, b2, wc, bc = p
    x = F.embedding(ids, emb)                                  # (B, j, D)
    h = F.layer_norm(x, (D,), ln1_w, ln1_b, 1e-5)
    qkv = F.linear(h, wqkv)                                    # (B, j, 3D)
    q, k, v = (nested_view(qkv.narrow(2, i * D, D), offsets, H, DH) for i in range(3))
    att = F.scaled_dot_product_attention(q, k, v)              # (B, j, H, DH)
    x2 = x + F.linear(nested_view(att, offsets, D), wo)        # residual
    h2 = F.layer_norm(x2, (D,), ln2_w, ln2_b, 1e-5)
    x3 = x2 + F.linear(F.gelu(F.linear(h2, w1, b1)), w2, b2)   # residual
    pool = x3.mean(dim=1)                                      # (B, D): mean over each document
    return F.cross_entropy(F.linear(pool, wc, bc), labels)


class Adam:
    def __init__(self, params, lr=3e-3, betas=(0.9, 0.999), eps=1e-8):
        self.lr, self.b1, self.b2, self.eps, self.step_count = lr, betas[0], betas[1], eps, 0
        self.m = [jag.zeros_like(p) for p in params]
        self.v = [jag.zeros_like(p) for p in params]

    def step(self, params):
        self.step_count += 1
        c1, c2 = 1 - self.b1 ** self.step_count, 1 - self.b2 ** self.step_count
        with jag.no_grad():
            for i, p in enumerate(params):
                g = p.grad
                if g is None:
                    continue
                self.m[i] = self.m[i] * self.b1 + g * (1 - self.b1)
                self.v[i] = self.v[i] * self.b2 + (g * g) * (1 - self.b2)
                den = jag.sqrt(self.v[i] * (1 / c2)) + self.eps
                params[i] = jag.add(p, self.m[i] / den, alpha=-self.lr / c1).requires_grad_()


def shuffled(n):
    """The fixed shuffle of train_ragged.c (a 64-bit LCG)."""
    order, s = list(range(n)), 12345
    for i in range(n - 1, 0, -1):
        s = (s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        j = (s >> 33) % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--data", action="append", default=[], metavar="PATH")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.batch < 1:
        ap.error("--steps and --batch must be positive")
    try:
        c = load_corpus(a.data, True) if a.data else load_corpus(FORTUNES, False)
    except SystemExit as e:
        if not a.data:
            raise SystemExit(str(e) + " (the fortunes-min package: scripts/setup.sh installs it)")
        raise
    classes = max(len(a.data) if a.data else 3, 2)
    print("training on %d documents (%d tokens, %d words), %d classes (the path each came from)"
          % (len(c.docs), sum(len(d) for d in c.docs), len(c.vocab), classes))
    jag.manual_seed(42)
    params = init_params(len(c.vocab), classes)
    opt = Adam(params)
    order, cursor = shuffled(len(c.docs)), 0
    first = avg = None
    tokens, t0 = 0, time.perf_counter()
    for step in range(1, a.steps + 1):
        nb = min(a.batch, len(c.docs))
        docs, labels = [], []
        for _ in range(nb):
            d = order[cursor % len(c.docs)]
            cursor += 1
            docs.append(c.docs[d][:128])  # a bound on the longest document
            labels.append(c.labels[d])
        offsets = [0]
        for d in docs:
            offsets.append(offsets[-1] + len(d))
        flat = [t for d in docs for t in d]
        offsets_t = jag.tensor(offsets, dtype=jag.int64)
        ids = jag.nested.nested_tensor_from_jagged(jag.tensor(flat, dtype=jag.int64), offsets_t)
        loss = forward(params, ids, offsets_t, jag.tensor(labels, dtype=jag.int64))
        value = loss.item()
        loss.backward()
        opt.step(params)
        tokens += len(flat)
        avg = value if step == 1 else 0.9 * avg + 0.1 * value
        first = value if step == 1 else first
        if step == 1 or step % 10 == 0 or step == a.steps:
            print("  step %4d  loss %.4f (smoothed %.4f)  %8.0f tokens/s"
                  % (step, value, avg, tokens / (time.perf_counter() - t0)))
    print("loss %.4f -> %.4f (smoothed) over %d steps: %s"
          % (first, avg, a.steps, "it learns" if avg < first else "it did not fall"))


if __name__ == "__main__":
    main()
