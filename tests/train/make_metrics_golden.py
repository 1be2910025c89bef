#!/usr/bin/env python3
"""Writes golden/metrics.json: reference values of the train metrics (test_metrics.cpp).

Each case gives a metric (by name and config), its inputs (output and target, flattened,
with shapes), the batch sizes in which the test feeds them (rows per update), and the
expected value() over every batch and last() of the final batch. The references are
computed here independently of ember's code: with PyTorch (topk, one-hot counts,
mse_loss, l1_loss), with numpy (R² per column), AUROC by counting every positive-negative
pair, BLEU from collections.Counter, and edit distance by a memoised recursion.

Run: /usr/bin/python3 tests/train/make_metrics_golden.py (from the repository root)."""
import collections
import functools
import json
import math
import os

import numpy as np
import torch

torch.manual_seed(7)
rng = np.random.default_rng(7)


def tolist(t):
    return [float(v) for v in t.flatten().tolist()]


def split_rows(n, batches):
    out, start = [], 0
    for b in batches:
        out.append((start, start + b))
        start += b
    assert start == n
    return out


# ---- classification ----

def class_counts(pred_onehot, true_onehot):
    tp = (pred_onehot * true_onehot).sum(0)
    fp = (pred_onehot * (1 - true_onehot)).sum(0)
    fn = ((1 - pred_onehot) * true_onehot).sum(0)
    return tp.double(), fp.double(), fn.double()


def score(kind, tp, fp, fn, average, beta=1.0):
    def one(tp, fp, fn):
        if kind == "precision":
            d = tp + fp
            return tp / d if d > 0 else 0.0
        if kind == "recall":
            d = tp + fn
            return tp / d if d > 0 else 0.0
        b2 = beta * beta
        d = (1 + b2) * tp + b2 * fn + fp
        return (1 + b2) * tp / d if d > 0 else 0.0
    if average == "micro":
        return float(one(tp.sum(), fp.sum(), fn.sum()))
    present = [(a, b, c) for a, b, c in zip(tp.tolist(), fp.tolist(), fn.tolist()) if a + b + c > 0]
    return float(sum(one(*p) for p in present) / len(present)) if present else 0.0


def predictions(scores, labels, multi_label, threshold):
    if multi_label:
        return (scores >= threshold).long(), labels.long()
    c = scores.shape[1]
    pred = torch.nn.functional.one_hot(scores.argmax(1), c)
    true = torch.nn.functional.one_hot(labels.long(), c)
    return pred, true


def classification_cases():
    cases = []
    n, c = 40, 5
    logits = torch.randn(n, c, dtype=torch.float64)
    labels = torch.randint(0, c, (n,))
    ml_scores = torch.rand(n, 4, dtype=torch.float64)
    ml_target = (torch.rand(n, 4) < 0.4).long()
    batches = [16, 16, 8]
    for multi_label, scores, target in [(False, logits, labels), (True, ml_scores, ml_target)]:
        threshold = 0.5
        for kind, beta in [("precision", 1.0), ("recall", 1.0), ("fbeta", 1.0), ("fbeta", 2.0),
                           ("fbeta", 0.5)]:
            for average in ["micro", "macro"]:
                def ref(lo, hi):
                    p, t = predictions(scores[lo:hi], target[lo:hi], multi_label, threshold)
                    return score(kind, *class_counts(p, t), average, beta)
                config = {"average": 0 if average == "micro" else 1, "threshold": threshold}
                if kind == "fbeta":
                    config["beta"] = beta
                lo, hi = split_rows(n, batches)[-1]
                cases.append({"metric": kind, "config": config,
                              "output": tolist(scores), "output_shape": list(scores.shape),
                              "target": tolist(target), "target_shape": list(target.shape),
                              "batches": batches, "value": ref(0, n), "last": ref(lo, hi)})
    # top-k accuracy
    for k in [1, 3]:
        def ref(lo, hi):
            top = logits[lo:hi].topk(k, dim=1).indices
            return float((top == labels[lo:hi, None]).any(1).double().mean())
        lo, hi = split_rows(n, batches)[-1]
        cases.append({"metric": "topk", "config": {"k": k}, "output": tolist(logits),
                      "output_shape": [n, c], "target": tolist(labels), "target_shape": [n],
                      "batches": batches, "value": ref(0, n), "last": ref(lo, hi)})
    # Hamming score
    def hamming(lo, hi):
        return float(((ml_scores[lo:hi] >= 0.5).long() == ml_target[lo:hi]).double().mean())
    lo, hi = split_rows(n, batches)[-1]
    cases.append({"metric": "hamming", "config": {"threshold": 0.5}, "output": tolist(ml_scores),
                  "output_shape": list(ml_scores.shape), "target": tolist(ml_target),
                  "target_shape": list(ml_target.shape), "batches": batches,
                  "value": hamming(0, n), "last": hamming(lo, hi)})
    # AUROC: every positive-negative pair, ties one half; scores rounded to make ties.
    def pair_auroc(s, positive):
        pos = [a for a, p in zip(s, positive) if p]
        neg = [a for a, p in zip(s, positive) if not p]
        if not pos or not neg:
            return None
        won = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in pos for b in neg)
        return won / (len(pos) * len(neg))

    def macro(values):
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else float("nan")

    bin_scores = torch.round(torch.rand(n, dtype=torch.float64) * 10) / 10
    bin_target = (torch.rand(n) < 0.5).long()
    for scores, target, columns in [
            (bin_scores, bin_target, None),
            (logits, labels, "multiclass"),
            (torch.round(ml_scores * 8) / 8, ml_target, "multilabel")]:
        def ref(lo, hi):
            s, t = scores[lo:hi], target[lo:hi]
            if columns is None:
                return macro([pair_auroc(s.tolist(), t.tolist())])
            if columns == "multiclass":
                return macro([pair_auroc(s[:, j].tolist(), (t == j).tolist()) for j in range(s.shape[1])])
            return macro([pair_auroc(s[:, j].tolist(), t[:, j].tolist()) for j in range(s.shape[1])])
        lo, hi = split_rows(n, batches)[-1]
        cases.append({"metric": "auroc", "config": {}, "output": tolist(scores),
                      "output_shape": list(scores.shape), "target": tolist(target),
                      "target_shape": list(target.shape), "batches": batches,
                      "value": ref(0, n), "last": ref(lo, hi)})
    return cases


# ---- regression ----

def regression_cases():
    cases = []
    batches = [10, 7, 13]
    n = sum(batches)
    for shape in [(n,), (n, 3)]:
        target = torch.randn(*shape, dtype=torch.float64) * 2 + 1
        output = target + 0.7 * torch.randn(*shape, dtype=torch.float64)
        lo, hi = split_rows(n, batches)[-1]
        for metric, fn in [("mse", torch.nn.functional.mse_loss),
                           ("mae", torch.nn.functional.l1_loss)]:
            cases.append({"metric": metric, "config": {}, "output": tolist(output),
                          "output_shape": list(shape), "target": tolist(target),
                          "target_shape": list(shape), "batches": batches,
                          "value": float(fn(output, target)),
                          "last": float(fn(output[lo:hi], target[lo:hi]))})
        y, p = target.numpy().reshape(n, -1), output.numpy().reshape(n, -1)

        def r2(lo, hi, weighted):
            yy, pp = y[lo:hi], p[lo:hi]
            res = ((yy - pp) ** 2).sum(0)
            tot = ((yy - yy.mean(0)) ** 2).sum(0)
            if weighted:
                return float(1 - res.sum() / tot.sum())
            return float(np.mean(1 - res / tot))
        for weighted in [False, True]:
            cases.append({"metric": "r2", "config": {"multioutput": 1 if weighted else 0},
                          "output": tolist(output), "output_shape": list(shape),
                          "target": tolist(target), "target_shape": list(shape),
                          "batches": batches, "value": r2(0, n, weighted),
                          "last": r2(lo, hi, weighted)})
    return cases


# ---- text ----

def edit_distance(a, b):
    @functools.lru_cache(maxsize=None)
    def d(i, j):
        if i == 0:
            return j
        if j == 0:
            return i
        return min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))
    return d(len(a), len(b))


def bleu(hyps, refs, max_n=4, smooth=False):
    matches, totals = [0] * max_n, [0] * max_n
    hl = rl = 0
    for h, r in zip(hyps, refs):
        h, r = h.split(), r.split()
        hl += len(h)
        rl += len(r)
        for n in range(1, max_n + 1):
            hc = collections.Counter(tuple(h[i:i + n]) for i in range(len(h) - n + 1))
            rc = collections.Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1))
            matches[n - 1] += sum(min(v, rc[g]) for g, v in hc.items())
            totals[n - 1] += sum(hc.values())
    if hl == 0:
        return 0.0
    logs = 0.0
    for n in range(max_n):
        m, t = matches[n], totals[n]
        if smooth and n > 0:
            m, t = m + 1, t + 1
        if m == 0 or t == 0:
            return 0.0
        logs += math.log(m / t)
    bp = 1.0 if hl >= rl else math.exp(1 - rl / hl)
    return bp * math.exp(logs / max_n)


def text_cases():
    words = "the a cat dog sat on mat and ran far away red blue big small".split()
    refs, hyps = [], []
    for _ in range(12):
        r = [words[i] for i in rng.integers(0, len(words), rng.integers(4, 12))]
        h = list(r)
        for _ in range(rng.integers(0, 4)):  # edit a few words
            op = rng.integers(0, 3)
            pos = int(rng.integers(0, len(h))) if h else 0
            if op == 0 and h:
                del h[pos]
            elif op == 1:
                h.insert(pos, words[rng.integers(0, len(words))])
            elif h:
                h[pos] = words[rng.integers(0, len(words))]
        refs.append(" ".join(r))
        hyps.append(" ".join(h))
    batches = [5, 4, 3]
    lo, hi = split_rows(len(refs), batches)[-1]

    def rate(hs, rs, unit):
        errors = sum(edit_distance(unit(h), unit(r)) for h, r in zip(hs, rs))
        return errors / sum(len(unit(r)) for r in rs)
    cases = []
    for metric, unit in [("cer", lambda s: tuple(s)), ("wer", lambda s: tuple(s.split()))]:
        cases.append({"metric": metric, "config": {}, "hypotheses": hyps, "references": refs,
                      "batches": batches, "value": rate(hyps, refs, unit),
                      "last": rate(hyps[lo:hi], refs[lo:hi], unit)})
    for smooth in [False, True]:
        for max_n in [2, 4]:
            cases.append({"metric": "bleu", "config": {"max_n": max_n, "smooth": smooth},
                          "hypotheses": hyps, "references": refs, "batches": batches,
                          "value": bleu(hyps, refs, max_n, smooth),
                          "last": bleu(hyps[lo:hi], refs[lo:hi], max_n, smooth)})
    return cases


def main():
    cases = classification_cases() + regression_cases() + text_cases()
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "metrics.json")
    with open(out, "w") as f:
        json.dump({"cases": cases}, f, indent=None)
        f.write("\n")
    print(f"{len(cases)} cases -> {out}")


if __name__ == "__main__":
    main()
