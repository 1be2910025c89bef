#!/usr/bin/env python3
"""examples/char_lm.cpp in eager PyTorch, for a side-by-side tokens/s.

The same model (byte vocabulary of the corpus; token and learned position embeddings with
N(0, 0.02) initialisation; pre-norm transformer encoder layers, gelu, d_ff = 4 d_model, no
dropout, under a causal mask; a final layer norm; a linear head), the same step (random
windows, cross-entropy, backward, gradient clipping at norm 1, AdamW with weight decay 0.1
on everything but biases and norms, linear warm-up over a tenth of the steps then cosine to
lr / 10) and the same read of the loss to the host every step. Default sizes are char_lm's:
batch 32 x 64, d_model 128, 4 layers, 4 heads, 600 steps.

    benches/char_lm_torch.py [--device cuda] [--corpus DIR_OR_FILE] [--steps N] ...

Prints char_lm's progress lines ("step N/M loss L T tokens/s", cumulative since the first
step) and a summary line with the steady rate after the first 100 steps.
"""
import argparse
import inspect
import math
import os
import time

import torch
from torch import nn

CAUSAL_KW = "is_causal" in inspect.signature(nn.TransformerEncoder.forward).parameters


def read_corpus(path):
    if os.path.isdir(path):
        names = sorted(
            n for n in os.listdir(path)
            if not n.endswith(".dat") and os.path.isfile(os.path.join(path, n))
            and not os.path.islink(os.path.join(path, n)))
        return b"".join(open(os.path.join(path, n), "rb").read() for n in names)
    return open(path, "rb").read()


class CharLm(nn.Module):
    def __init__(self, vocab, max_seq, d_model, layers, heads):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_seq, d_model)
        nn.init.normal_(self.tok.weight, 0.0, 0.02)
        nn.init.normal_(self.pos.weight, 0.0, 0.02)
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model,
                                           dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d_model),
                                            enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, idx, mask):
        seq = idx.shape[1]
        pos = torch.arange(seq, device=idx.device).unsqueeze(0)
        x = self.tok(idx) + self.pos(pos)
        if CAUSAL_KW:  # PyTorch 2: says the mask is the causal one (a faster attention path)
            return self.head(self.blocks(x, mask=mask, is_causal=True))
        return self.head(self.blocks(x, mask=mask))


def report_profile(prof, steps):
    """Kernels per step, device and host time per step, and the ops of most host time."""
    events = prof.events()
    kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    dev_us = sum(e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
                 for e in kernels)
    print(f"profile: {steps} steps: {len(kernels) / steps:.0f} device kernels per step, "
          f"{dev_us / steps / 1000:.2f} ms of kernel time per step")
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15,
                                      max_name_column_width=40)
    print(table)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--corpus", default="/usr/share/games/fortunes")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--profile", type=int, default=0,
                   help="profile this many steps after step 20 with torch.profiler and print "
                        "kernels per step and the ops taking the most host time")
    a = p.parse_args()

    text = read_corpus(a.corpus)
    chars = sorted(set(text))
    ids = {c: i for i, c in enumerate(chars)}
    tokens = torch.tensor([ids[c] for c in text], dtype=torch.int64)
    split = len(tokens) * 9 // 10
    train, valid = tokens[:split], tokens[split:]
    vocab = len(chars)
    dev = torch.device(a.device)
    torch.manual_seed(a.seed)
    model = CharLm(vocab, a.seq, a.d_model, a.layers, a.heads).to(dev)
    print(f"char_lm_torch: torch {torch.__version__}, {len(tokens)} characters, vocabulary "
          f"{vocab}, device {dev}, {sum(q.numel() for q in model.parameters())} parameters")

    decay = [q for n, q in model.named_parameters() if q.dim() >= 2 and "norm" not in n]
    no_decay = [q for n, q in model.named_parameters() if not (q.dim() >= 2 and "norm" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr)
    warmup = max(1, a.steps // 10)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [
        torch.optim.lr_scheduler.LinearLR(opt, 1.0 / warmup, 1.0, warmup),
        torch.optim.lr_scheduler.CosineAnnealingLR(opt, a.steps - min(a.steps, warmup),
                                                   eta_min=a.lr / 10)], [warmup])
    mask = nn.Transformer.generate_square_subsequent_mask(a.seq, device=dev)
    gen = torch.Generator().manual_seed(a.seed)

    def draw(src):
        start = torch.randint(0, len(src) - a.seq - 1, (a.batch,), generator=gen)
        offs = start.unsqueeze(1) + torch.arange(a.seq).unsqueeze(0)
        return src[offs].to(dev), src[offs + 1].to(dev)

    t0 = time.perf_counter()
    smoothed = math.log(vocab)
    t100 = None
    prof = None
    for step in range(1, a.steps + 1):
        if a.profile and step == 21:
            acts = [torch.profiler.ProfilerActivity.CPU]
            if dev.type == "cuda":
                acts.append(torch.profiler.ProfilerActivity.CUDA)
            prof = torch.profiler.profile(activities=acts)
            prof.__enter__()
        if prof is not None and step == 21 + a.profile:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            prof.__exit__(None, None, None)
            report_profile(prof, a.profile)
            prof = None
        x, y = draw(train)
        logits = model(x, mask)
        loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        l = loss.item()
        if not math.isfinite(l):
            raise SystemExit(f"char_lm_torch: the loss became {l} at step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        smoothed = 0.95 * smoothed + 0.05 * l
        if step == 100:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t100 = time.perf_counter()
        if step % 50 == 0 or step == a.steps:
            secs = time.perf_counter() - t0
            print(f"step {step:5d}/{a.steps}  loss {smoothed:.3f}  "
                  f"{step * a.batch * a.seq / secs:.0f} tokens/s", flush=True)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    model.eval()
    vgen = torch.Generator().manual_seed(a.seed + 1)
    total = 0.0
    with torch.no_grad():
        for _ in range(8):
            start = torch.randint(0, len(valid) - a.seq - 1, (a.batch,), generator=vgen)
            offs = start.unsqueeze(1) + torch.arange(a.seq).unsqueeze(0)
            x, y = valid[offs].to(dev), valid[offs + 1].to(dev)
            total += nn.functional.cross_entropy(model(x, mask).reshape(-1, vocab),
                                                 y.reshape(-1)).item()
    vloss = total / 8
    steady = ((a.steps - 100) * a.batch * a.seq / (t1 - t100)) if t100 and a.steps > 100 else 0
    print(f"validation: loss {vloss:.3f}, perplexity {math.exp(vloss):.2f}; {t1 - t0:.1f} s of "
          f"training")
    print(f"summary: torch tokens/s overall {a.steps * a.batch * a.seq / (t1 - t0):.0f}, "
          f"steady (after step 100) {steady:.0f}")


if __name__ == "__main__":
    main()
