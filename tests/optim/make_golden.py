#!/usr/bin/python3
"""Golden trajectories for tests/optim (run with /usr/bin/python3, Debian's torch 1.13).

Writes tests/optim/golden/optimizers.json and schedulers.json:

- optimizers: a small MLP (fc1: Linear(4, 6), tanh, fc2: Linear(6, 3)) and a small conv
  model ("conv": conv: Conv2d(2, 2, 3, padding 1), tanh, flattened, fc: Linear(18, 2)) with
  fixed initial weights, each trained for 20 steps on a fixed batch with loss
  mean((model(x) - t)^2), in f32 and f64. Each case stores the parameters after every step
  (the MLP's at the top level, the conv model's under "conv"). torch.optim gives the trajectories
  of SGD, Adam, AdamW, Adagrad and RMSprop; Lion, Adan, Adafactor and Muon, which torch 1.13
  lacks, are written below in NumPy from each paper's published algorithm (torch only
  computes the gradients, by autograd).
- schedulers: the learning rate of each torch.optim.lr_scheduler case over 100 steps.
- lbfgs: torch.optim.LBFGS on the same MLP in f64, with and without the strong-Wolfe line
  search, over several step() calls (each of a few iterations, with a short history, so
  the history's eviction and the state carried between calls are exercised): the params,
  the closure calls and the iterations after each call.
- param_groups: two groups of the MLP (fc1's params, fc2's) under one torch.optim.Adam,
  each with its own schedule (LambdaLR with one factor function per group), 20 steps.

The C++ tests rebuild the model from the stored initial weights, compute the gradients
with ember's autodiff and compare every step.
"""
import json
import math
import os

import numpy as np
import torch

STEPS = 20
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
PATHS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]

rng = np.random.default_rng(20261201)
INIT = {
    "fc1.weight": rng.uniform(-0.6, 0.6, (6, 4)),
    "fc1.bias": rng.uniform(-0.3, 0.3, (6,)),
    "fc2.weight": rng.uniform(-0.6, 0.6, (3, 6)),
    "fc2.bias": rng.uniform(-0.3, 0.3, (3,)),
}
X = rng.uniform(-1.0, 1.0, (8, 4))
T = rng.uniform(-1.0, 1.0, (8, 3))
# The conv model's, drawn after the MLP's so that those stay as they were.
CONV_PATHS = ["conv.weight", "conv.bias", "fc.weight", "fc.bias"]
CONV_INIT = {
    "conv.weight": rng.uniform(-0.4, 0.4, (2, 2, 3, 3)),
    "conv.bias": rng.uniform(-0.3, 0.3, (2,)),
    "fc.weight": rng.uniform(-0.4, 0.4, (2, 18)),
    "fc.bias": rng.uniform(-0.3, 0.3, (2,)),
}
CONV_X = rng.uniform(-1.0, 1.0, (3, 2, 3, 3))
CONV_T = rng.uniform(-1.0, 1.0, (3, 2))

DTYPES = {"f32": (torch.float32, np.float32), "f64": (torch.float64, np.float64)}


def mlp_loss(params, tdt):
    w1, b1, w2, b2 = params
    x = torch.tensor(X, dtype=tdt)
    t = torch.tensor(T, dtype=tdt)
    h = torch.tanh(x @ w1.T + b1)
    y = h @ w2.T + b2
    return ((y - t) ** 2).mean()


def conv_loss(params, tdt):
    wc, bc, wf, bf = params
    x = torch.tensor(CONV_X, dtype=tdt)
    t = torch.tensor(CONV_T, dtype=tdt)
    h = torch.tanh(torch.nn.functional.conv2d(x, wc, bc, padding=1)).reshape(x.shape[0], -1)
    y = h @ wf.T + bf
    return ((y - t) ** 2).mean()


class Model:
    def __init__(self, paths, init, loss):
        self.paths, self.init, self.loss = paths, init, loss


MLP = Model(PATHS, INIT, mlp_loss)
CONV = Model(CONV_PATHS, CONV_INIT, conv_loss)


def make_params(tdt, model=MLP):
    return [torch.tensor(model.init[p], dtype=tdt, requires_grad=True) for p in model.paths]


def loss_of(params, tdt, model=MLP):
    return model.loss(params, tdt)


def snapshot(params, model=MLP):
    return {p: v.detach().to(torch.float64).reshape(-1).tolist() for p, v in zip(model.paths, params)}


def torch_case(make_opt, tdt, model=MLP):
    params = make_params(tdt, model)
    opt = make_opt(params)
    traj = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss_of(params, tdt, model).backward()
        opt.step()
        traj.append(snapshot(params, model))
    return traj


def numpy_case(update, tdt, ndt, model=MLP):
    """update(path, param, grad, state, step, dtype) -> new param (NumPy arrays of ndt)."""
    params = make_params(tdt, model)
    states = [dict() for _ in model.paths]
    traj = []
    for step in range(1, STEPS + 1):
        for p in params:
            p.grad = None
        loss_of(params, tdt, model).backward()
        with torch.no_grad():
            for i, (path, p) in enumerate(zip(model.paths, params)):
                new = update(path, p.detach().numpy().copy(), p.grad.numpy().copy(), states[i], step, ndt)
                p.copy_(torch.from_numpy(np.asarray(new, dtype=ndt)))
        traj.append(snapshot(params, model))
    return traj


# ---- NumPy reference optimizers, from the papers ----

def lion(lr, beta1, beta2, wd):
    # Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms", Program 1.
    def update(path, p, g, s, step, dt):
        m = s.get("exp_avg", np.zeros_like(p))
        c = dt(beta1) * m + dt(1 - beta1) * g
        p = p * dt(1 - lr * wd) - dt(lr) * np.sign(c)
        s["exp_avg"] = dt(beta2) * m + dt(1 - beta2) * g
        return p
    return update


def adan(lr, beta1, beta2, beta3, eps, wd):
    # Xie et al. 2022, "Adan: Adaptive Nesterov Momentum Algorithm", Algorithm 1 with the
    # bias corrections of the authors' release; betas weigh the old value (m = b1 m + (1-b1) g),
    # so the paper's beta_i is 1 - beta_i here. The first step has no previous gradient
    # (difference 0). The weight decay is the paper's proximal step.
    def update(path, p, g, s, step, dt):
        if step == 1:
            s["exp_avg"] = np.zeros_like(p)
            s["exp_avg_diff"] = np.zeros_like(p)
            s["exp_avg_sq"] = np.zeros_like(p)
            s["prev_grad"] = g.copy()
        diff = g - s["prev_grad"]
        s["exp_avg"] = dt(beta1) * s["exp_avg"] + dt(1 - beta1) * g
        s["exp_avg_diff"] = dt(beta2) * s["exp_avg_diff"] + dt(1 - beta2) * diff
        u = g + dt(beta2) * diff
        s["exp_avg_sq"] = dt(beta3) * s["exp_avg_sq"] + dt(1 - beta3) * u * u
        bc1 = 1 - beta1 ** step
        bc2 = 1 - beta2 ** step
        bc3 = 1 - beta3 ** step
        denom = np.sqrt(s["exp_avg_sq"]) / dt(math.sqrt(bc3)) + dt(eps)
        upd = (s["exp_avg"] / dt(bc1) + dt(beta2) * s["exp_avg_diff"] / dt(bc2)) / denom
        s["prev_grad"] = g.copy()
        return (p - dt(lr) * upd) / dt(1 + lr * wd)
    return update


def adafactor(lr, eps1, eps2, clip, decay_rate, wd):
    # Shazeer & Stern 2018, "Adafactor", Algorithms 4 (factored, rank >= 2) and 5 (vectors),
    # with the update clipping of Section 6 and the relative step size alpha = lr * max(eps2,
    # RMS(param)) of Section 8 (an external lr in place of the paper's rho_t); no momentum.
    # Weight decay is decoupled: param -= wd * alpha * param.
    def rms(a):
        return np.sqrt(np.mean(a * a))

    def update(path, p, g, s, step, dt):
        beta2t = dt(1.0 - step ** decay_rate)
        g2 = g * g + dt(eps1)
        if p.ndim >= 2:
            r = s.get("exp_avg_sq_row", np.zeros(p.shape[:-1], dtype=dt))
            c = s.get("exp_avg_sq_col", np.zeros(p.shape[:-2] + p.shape[-1:], dtype=dt))
            r = beta2t * r + (dt(1) - beta2t) * g2.mean(axis=-1)
            c = beta2t * c + (dt(1) - beta2t) * g2.mean(axis=-2)
            s["exp_avg_sq_row"], s["exp_avg_sq_col"] = r, c
            r_factor = 1 / np.sqrt(r / r.mean(axis=-1, keepdims=True))
            c_factor = 1 / np.sqrt(c)
            u = g * r_factor[..., :, None] * c_factor[..., None, :]
        else:
            v = s.get("exp_avg_sq", np.zeros_like(p))
            v = beta2t * v + (dt(1) - beta2t) * g2
            s["exp_avg_sq"] = v
            u = g / np.sqrt(v)
        u = u / dt(max(1.0, float(rms(u)) / clip))
        alpha = dt(lr * max(eps2, float(rms(p))))
        p = p - dt(wd) * alpha * p
        return p - alpha * u
    return update


def muon(lr, momentum, nesterov, ns_steps, wd, adam_betas, adam_eps):
    # Jordan et al. 2024, "Muon: An optimizer for hidden layers": SGD momentum, then the
    # update of each matrix orthogonalised by a quintic Newton-Schulz iteration with
    # coefficients (3.4445, -4.7750, 2.0315), scaled by sqrt(max(1, rows / cols)); decoupled
    # weight decay. Tensors of rank != 2 take AdamW (as torch.optim.AdamW) with the same lr.
    a, b, c = 3.4445, -4.7750, 2.0315

    def orth(gm, dt):
        x = gm / (np.sqrt(np.sum(gm * gm)) + dt(1e-7))
        tr = x.shape[0] > x.shape[1]
        if tr:
            x = x.T
        for _ in range(ns_steps):
            am = x @ x.T
            bm = dt(b) * am + dt(c) * (am @ am)
            x = dt(a) * x + bm @ x
        return x.T if tr else x

    def update(path, p, g, s, step, dt):
        if p.ndim == 2:
            buf = s.get("momentum_buffer", np.zeros_like(p))
            buf = dt(momentum) * buf + g
            s["momentum_buffer"] = buf
            u = g + dt(momentum) * buf if nesterov else buf
            o = orth(u, dt)
            scale = math.sqrt(max(1.0, p.shape[0] / p.shape[1]))
            p = p * dt(1 - lr * wd)
            return p - dt(lr * scale) * o
        b1, b2 = adam_betas
        m = s.get("exp_avg", np.zeros_like(p))
        v = s.get("exp_avg_sq", np.zeros_like(p))
        p = p * dt(1 - lr * wd)
        m = dt(b1) * m + dt(1 - b1) * g
        v = dt(b2) * v + dt(1 - b2) * g * g
        s["exp_avg"], s["exp_avg_sq"] = m, v
        denom = np.sqrt(v) / dt(math.sqrt(1 - b2 ** step)) + dt(adam_eps)
        return p - dt(lr / (1 - b1 ** step)) * m / denom
    return update


TORCH_CASES = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
    "sgd_nesterov": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01, weight_decay=0.01),
    "adam_amsgrad": lambda ps: torch.optim.Adam(ps, lr=0.01, betas=(0.8, 0.9), weight_decay=0.01, amsgrad=True),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
    "adamw_amsgrad": lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1, amsgrad=True),
    "adagrad": lambda ps: torch.optim.Adagrad(ps, lr=0.1, lr_decay=0.01, weight_decay=0.01,
                                              initial_accumulator_value=0.1),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=0.01, alpha=0.9, weight_decay=0.01),
    "rmsprop_centered": lambda ps: torch.optim.RMSprop(ps, lr=0.01, alpha=0.9, weight_decay=0.01,
                                                       momentum=0.5, centered=True),
}
NUMPY_CASES = {
    "lion": lion(lr=0.01, beta1=0.9, beta2=0.99, wd=0.1),
    "adan": adan(lr=0.01, beta1=0.98, beta2=0.92, beta3=0.99, eps=1e-8, wd=0.02),
    "adafactor": adafactor(lr=0.05, eps1=1e-30, eps2=1e-3, clip=1.0, decay_rate=-0.8, wd=0.01),
    "muon": muon(lr=0.02, momentum=0.95, nesterov=True, ns_steps=5, wd=0.01,
                 adam_betas=(0.9, 0.999), adam_eps=1e-8),
}


def model_cases(model, x, t):
    out = {"steps": STEPS, "paths": model.paths,
           "shapes": {p: list(model.init[p].shape) for p in model.paths},
           "init": {p: model.init[p].reshape(-1).tolist() for p in model.paths},
           "x": x.reshape(-1).tolist(), "t": t.reshape(-1).tolist(),
           "x_shape": list(x.shape), "t_shape": list(t.shape), "cases": {}}
    for dname, (tdt, ndt) in DTYPES.items():
        for name, make in TORCH_CASES.items():
            out["cases"][f"{name}_{dname}"] = torch_case(make, tdt, model)
        for name, upd in NUMPY_CASES.items():
            out["cases"][f"{name}_{dname}"] = numpy_case(upd, tdt, ndt, model)
    return out


def optimizers():
    out = model_cases(MLP, X, T)
    out["conv"] = model_cases(CONV, CONV_X, CONV_T)
    return out


def schedulers():
    from torch.optim import lr_scheduler as S
    base = 0.1

    def noam(model_size, warmup):
        return lambda e: model_size ** -0.5 * min((e + 1) ** -0.5, (e + 1) * warmup ** -1.5)

    cases = {
        "constant": lambda o: S.ConstantLR(o, factor=0.25, total_iters=10),
        "linear": lambda o: S.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=30),
        "step": lambda o: S.StepLR(o, step_size=7, gamma=0.5),
        "multistep": lambda o: S.MultiStepLR(o, milestones=[10, 25, 60], gamma=0.3),
        "exponential": lambda o: S.ExponentialLR(o, gamma=0.97),
        "cosine": lambda o: S.CosineAnnealingLR(o, T_max=40, eta_min=0.001),
        "cosine_restarts": lambda o: S.CosineAnnealingWarmRestarts(o, T_0=10, T_mult=2, eta_min=0.001),
        "onecycle": lambda o: S.OneCycleLR(o, max_lr=0.1, total_steps=100, cycle_momentum=False),
        "onecycle_linear_three_phase": lambda o: S.OneCycleLR(
            o, max_lr=0.1, total_steps=100, pct_start=0.25, anneal_strategy="linear",
            div_factor=10.0, final_div_factor=100.0, three_phase=True, cycle_momentum=False),
        "noam": lambda o: S.LambdaLR(o, noam(512, 10)),
        "warmup_cosine": lambda o: S.SequentialLR(o, [
            S.LinearLR(o, start_factor=0.01, end_factor=1.0, total_iters=10),
            S.CosineAnnealingLR(o, T_max=90, eta_min=1e-4)], milestones=[10]),
        "warmup_step": lambda o: S.SequentialLR(o, [
            S.ConstantLR(o, factor=0.1, total_iters=5),
            S.ExponentialLR(o, gamma=0.95)], milestones=[5]),
    }
    out = {}
    for name, make in cases.items():
        p = torch.zeros(1, requires_grad=True)
        lr0 = 1.0 if name == "noam" else base
        opt = torch.optim.SGD([p], lr=lr0)
        sch = make(opt)
        lrs = []
        for _ in range(100):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sch.step()
        out[name] = lrs
    return out


LBFGS_CASES = {
    "lbfgs_strong_wolfe": dict(lr=1.0, max_iter=4, history_size=3, line_search_fn="strong_wolfe"),
    "lbfgs_fixed_step": dict(lr=0.3, max_iter=4, history_size=3),
}
LBFGS_CALLS = 6


def lbfgs():
    out = {"calls": LBFGS_CALLS, "cases": {}}
    tdt = torch.float64
    for name, kw in LBFGS_CASES.items():
        params = make_params(tdt)
        opt = torch.optim.LBFGS(params, **kw)

        def closure():
            opt.zero_grad()
            loss = loss_of(params, tdt)
            loss.backward()
            return loss

        calls = []
        for _ in range(LBFGS_CALLS):
            loss = float(opt.step(closure))
            st = opt.state[params[0]]
            calls.append({"params": snapshot(params), "loss": loss,
                          "evaluations": st["func_evals"], "iterations": st["n_iter"]})
        out["cases"][name] = {"config": kw, "steps": calls}
    return out


def warmup_cosine(k):  # linear warm-up over 5 steps, then cosine to 0 over 15
    return (k + 1) / 5 if k < 5 else 0.5 * (1 + math.cos(math.pi * (k - 5) / 15))


def param_groups():
    """fc1.* with Adam at 0.01 under warmup_cosine, fc2.* with Adam at 0.05 under
    0.8^k (torch.optim.lr_scheduler.LambdaLR with one function per group)."""
    out = {"steps": STEPS, "cases": {}}
    for dname, (tdt, _) in DTYPES.items():
        params = make_params(tdt)
        opt = torch.optim.Adam([{"params": params[:2], "lr": 0.01},
                                {"params": params[2:], "lr": 0.05}], weight_decay=0.01)
        sch = torch.optim.lr_scheduler.LambdaLR(opt, [warmup_cosine, lambda k: 0.8 ** k])
        traj, lrs = [], []
        for _ in range(STEPS):
            lrs.append([g["lr"] for g in opt.param_groups])
            opt.zero_grad()
            loss_of(params, tdt).backward()
            opt.step()
            sch.step()
            traj.append(snapshot(params))
        out["cases"][dname] = {"params": traj, "lrs": lrs}
    return out


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    import warnings
    warnings.filterwarnings("ignore")
    with open(os.path.join(OUT, "optimizers.json"), "w") as f:
        json.dump(optimizers(), f)
    with open(os.path.join(OUT, "schedulers.json"), "w") as f:
        json.dump(schedulers(), f, indent=0)
    with open(os.path.join(OUT, "lbfgs.json"), "w") as f:
        json.dump(lbfgs(), f)
    with open(os.path.join(OUT, "param_groups.json"), "w") as f:
        json.dump(param_groups(), f)
    print("wrote", OUT)
