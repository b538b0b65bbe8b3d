"""train_ragged.py — the model of train_ragged.c, in Python with jag's
torch-like modules: a small transformer classifier trained on real ragged
text, nested end to end (no padding anywhere).

Data: the fortune files of Debian's fortunes-min, or --data PATH... (a file:
one document per line; a directory: one document per file); the label of a
document is the path it came from. Documents longer than 128 tokens are cut
to their first 128.

Validation: document d is held out when u[d] < 0.1, u = jag.rand(n_docs,
dtype=jag.float64, generator=jag.Generator().manual_seed(1)); its loss and accuracy are
printed at the end of every epoch and after the last step, next to the
majority class's accuracy (the most common label of the training split).

Batches: jag.utils.data.TokenBudgetBatchSampler (at most --max-tokens
tokens a batch, seed 0, set_epoch at every epoch) and a DataLoader that
makes the next batches on a background thread (num_workers=1).

Model: Embedding -> [LayerNorm -> MultiheadAttention (4 heads, no biases)
over the ragged dim -> +x] -> [LayerNorm -> Linear -> gelu -> Linear -> +x]
-> mean over the ragged dim -> Linear -> cross entropy; jag.optim.Adam (lr
3e-3). The tokenizer, the split, the batches, the initialisation (the
modules' own, from jag.manual_seed(42)) and the optimiser are those of
train_ragged.c, so both print the same losses.

    python examples/train_ragged.py [--steps N] [--max-tokens T] [--data PATH]...
"""
import argparse
import os
import re
import string
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import jag  # noqa: E402
import jag.nn as nn  # noqa: E402
import jag.nn.functional as F  # noqa: E402
from jag.utils.data import DataLoader, Dataset, TokenBudgetBatchSampler, collate_nested  # noqa: E402

D, H, HID, MAX_LEN = 64, 4, 256, 128
LR, INIT_SEED, SPLIT_SEED, VAL_FRACTION, SAMPLER_SEED = 3e-3, 42, 1, 0.1, 0
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


# ---- the data ------------------------------------------------------------------

class Documents(Dataset):
    """The documents docs[i] of the corpus (cut to MAX_LEN tokens): item i
    is (token ids as an int64 tensor, label). collate_nested makes a batch
    (ids: a jagged nested (B, j) tensor, labels: (B,)) without padding."""

    def __init__(self, corpus, docs):
        self.items = [(jag.tensor(corpus.docs[d][:MAX_LEN], dtype=jag.int64), corpus.labels[d]) for d in docs]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]

    def lengths(self):
        return [ids.shape[0] for ids, _ in self.items]


def split_documents(n_docs):
    """(train, validation) document ids: d is held out when u[d] < 0.1."""
    u = jag.rand(n_docs, dtype=jag.float64, generator=jag.Generator().manual_seed(SPLIT_SEED)).tolist()
    val = [d for d in range(n_docs) if u[d] < VAL_FRACTION]
    train = [d for d in range(n_docs) if u[d] >= VAL_FRACTION]
    return train, val


# ---- the model ------------------------------------------------------------------

class Classifier(nn.Module):
    """One pre-norm transformer encoder layer over each document, mean
    pooled, then a linear classifier."""

    def __init__(self, vocab, classes):
        super().__init__()
        self.embed = nn.Embedding(vocab, D)
        self.norm1 = nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, H, bias=False, batch_first=True)
        self.norm2 = nn.LayerNorm(D)
        self.ff1 = nn.Linear(D, HID)
        self.ff2 = nn.Linear(HID, D)
        self.head = nn.Linear(D, classes)

    def forward(self, ids):
        """ids (B, j) nested -> logits (B, classes)."""
        x = self.embed(ids)                                              # (B, j, D)
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]                # residual
        x = x + self.ff2(F.gelu(self.ff1(self.norm2(x))))                # residual
        return self.head(x.mean(dim=1))                                  # mean over each document


def evaluate(model, loader, n):
    """(mean cross entropy, accuracy) over the n documents of loader."""
    total, correct = 0.0, 0
    with jag.no_grad():
        for ids, labels in loader:
            logits = model(ids)
            total += F.cross_entropy(logits, labels).item() * labels.shape[0]
            correct += int((logits.argmax(dim=1) == labels).sum().item())
    return total / n, correct / n


def majority_accuracy(labels, train, val, classes):
    """The share of validation documents whose label is the training
    split's most common one (the lowest on ties)."""
    count = [0] * classes
    for d in train:
        count[labels[d]] += 1
    best = max(range(classes), key=lambda k: (count[k], -k))
    return sum(labels[d] == best for d in val) / len(val)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--max-tokens", type=int, default=640)
    ap.add_argument("--data", action="append", default=[], metavar="PATH")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.max_tokens < MAX_LEN:
        ap.error("--steps must be positive and --max-tokens at least %d (the longest document)" % MAX_LEN)
    try:
        c = load_corpus(a.data, True) if a.data else load_corpus(FORTUNES, False)
    except SystemExit as e:
        if not a.data:
            raise SystemExit(str(e) + " (the fortunes-min package: scripts/setup.sh installs it)")
        raise
    classes = max(len(a.data) if a.data else 3, 2)
    train_docs, val_docs = split_documents(len(c.docs))
    if not train_docs:
        raise SystemExit("train: all %d documents were drawn for validation: give more documents" % len(c.docs))
    print("training on %d documents (%d tokens, %d words), %d classes (the path each came from)"
          % (len(c.docs), sum(len(d) for d in c.docs), len(c.vocab), classes))
    print("held out for validation: %d documents (u[d] < %.1f, u the uniforms of generator seed %d), "
          "%d left to train on" % (len(val_docs), VAL_FRACTION, SPLIT_SEED, len(train_docs)))

    train_set, val_set = Documents(c, train_docs), Documents(c, val_docs)
    sampler = TokenBudgetBatchSampler(train_set.lengths(), a.max_tokens, shuffle=True, seed=SAMPLER_SEED)
    loader = DataLoader(train_set, batch_sampler=sampler, collate_fn=collate_nested, num_workers=1)
    val_loader = DataLoader(val_set, collate_fn=collate_nested,
                            batch_sampler=TokenBudgetBatchSampler(val_set.lengths(), a.max_tokens, shuffle=False))
    jag.manual_seed(INIT_SEED)
    model = Classifier(len(c.vocab), classes)
    opt = jag.optim.Adam(model.parameters(), lr=LR)
    print("batches of at most %d tokens (TokenBudgetBatchSampler, seed %d): %d in the first epoch"
          % (a.max_tokens, SAMPLER_SEED, len(sampler)))

    step, epoch, first, avg, accuracy = 0, 0, None, None, None
    tokens, seconds = 0, 0.0
    while step < a.steps:
        sampler.set_epoch(epoch)
        n_batches, t0 = len(loader), time.perf_counter()
        for b, (ids, labels) in enumerate(loader):
            step += 1
            loss = F.cross_entropy(model(ids), labels)
            value = loss.item()
            loss.backward()
            opt.step()
            opt.zero_grad()
            now = time.perf_counter()
            seconds, t0 = seconds + (now - t0), now
            tokens += ids.values().shape[0]
            avg = value if step == 1 else 0.9 * avg + 0.1 * value
            first = value if step == 1 else first
            if step == 1 or step % 10 == 0 or step == a.steps:
                print("  step %4d/%d  epoch %d  loss %.4f (smoothed %.4f)  %6.0f tokens/s"
                      % (step, a.steps, epoch + 1, value, avg, tokens / seconds), flush=True)
            epoch_done = b == n_batches - 1
            if val_docs and (epoch_done or step == a.steps):
                loss_v, accuracy = evaluate(model, val_loader, len(val_docs))
                when = "epoch %d done" % (epoch + 1) if epoch_done else "step %d" % step
                print("  %s: validation loss %.4f  accuracy %.1f%%" % (when, loss_v, 100 * accuracy), flush=True)
                t0 = time.perf_counter()  # the evaluation is not training time
            if step == a.steps:
                break
        epoch += 1
    if val_docs:
        print("validation accuracy %.1f%% after %d steps (majority class %.1f%%; %d held-out documents); "
              "training loss %.4f -> %.4f (smoothed)"
              % (100 * accuracy, a.steps, 100 * majority_accuracy(c.labels, train_docs, val_docs, classes),
                 len(val_docs), first, avg))
    else:
        print("no document was held out (too few documents): training loss %.4f -> %.4f (smoothed)" % (first, avg))


if __name__ == "__main__":
    main()
