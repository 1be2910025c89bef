#!/usr/bin/python3
"""Derive the float32 polynomial coefficients used by src/cpu/kernels/vmath.hpp.

Each kernel approximates a smooth remainder g(x) of a function on a reduced interval by a
polynomial in x (or x^2).  We solve for near-minimax coefficients with Lawson's algorithm
(iteratively reweighted least squares on Chebyshev nodes), minimising the *relative* error of
the full function, not of the remainder.  Coefficients are then rounded to float32 one at a time
from the lowest order up, re-fitting the higher ones after each rounding so that they absorb the
rounding error of the lower ones.  Reference values come from mpmath at 40 digits.

Run: /usr/bin/python3 tools/fit_vmath.py   (needs numpy and mpmath)
Prints C++ hexfloat literals and the predicted max relative error of each fit (before the float
evaluation error, which the unit tests measure).
"""
import re

import mpmath as mp
import numpy as np

mp.mp.dps = 40


def cheb_nodes(a, b, n):
    k = np.arange(n)
    return 0.5 * (a + b) + 0.5 * (b - a) * np.cos((2 * k + 1) * np.pi / (2 * n))[::-1]


def lawson(A, y, w, iters=200):
    """Weighted minimax of A c ~ y with error weight w (Lawson's algorithm)."""
    lw = np.ones(len(y)) / len(y)
    c = None
    for _ in range(iters):
        sw = np.sqrt(lw) * w
        c, *_ = np.linalg.lstsq(A * sw[:, None], y * sw, rcond=None)
        e = np.abs((A @ c - y) * w)
        lw = lw * e
        s = lw.sum()
        if s == 0:
            break
        lw /= s
    return c


def hexf(v):
    """float32 value as a compact C++ hexfloat literal."""
    m = re.match(r"(-?0x[01])\.?([0-9a-f]*)p([+-]\d+)", float(np.float32(v)).hex())
    frac = m.group(2).rstrip("0")
    return f"{m.group(1)}{'.' + frac if frac else ''}p{m.group(3)}f"


def fit(name, a, b, g, weight, powers, var=lambda x: x, n=1500):
    """Fit g(x) ~ sum c_k var(x)^powers[k] on [a, b] minimising |weight(x) * error|."""
    xs = cheb_nodes(a, b, n)
    y = np.array([float(g(mp.mpf(float(x)))) for x in xs])
    w = np.array([float(weight(mp.mpf(float(x)))) for x in xs])
    v = np.array([float(var(mp.mpf(float(x)))) for x in xs])
    A = np.stack([v**p for p in powers], axis=1)
    fixed = []
    for k in range(len(powers)):
        # Fit the remaining coefficients with the already-rounded ones held fixed.
        resid = y - (A[:, :k] @ np.array(fixed) if k else 0.0)
        c = lawson(A[:, k:], resid, w)
        fixed.append(float(np.float32(c[0])))
    c = np.array(fixed, dtype=np.float64)
    err = np.max(np.abs((A @ c - y) * w))
    print(f"// {name}: interval [{a:.6g}, {b:.6g}], max weighted rel err {err:.3e}")
    print("  " + ", ".join(hexf(ci) for ci in c))
    return c


def split(v, parts, bits=None):
    """Cody-Waite split of v into float32 parts; with bits, every part but the last keeps only
    `bits` significant bits so that k * part is exact for |k| < 2^(24 - bits) without FMA."""
    out, rest = [], mp.mpf(v)
    for i in range(parts):
        if bits is not None and i < parts - 1:
            e = mp.floor(mp.log(abs(rest), 2))
            q = mp.mpf(2) ** (e - bits + 1)
            part = mp.nint(rest / q) * q
        else:
            part = mp.mpf(float(np.float32(float(rest))))
        out.append(float(part))
        rest -= part
    print("  " + ", ".join(hexf(x) for x in out))


def main():
    print("// ln2 split (13-bit hi: k*hi exact for |k| < 2^11), for exp and log")
    split(mp.log(2), 2, bits=13)
    print("// pi/2 split, FMA (three full floats) and no-FMA (12-bit parts, |k| < 2^12)")
    split(mp.pi / 2, 3)
    split(mp.pi / 2, 4, bits=12)
    print("// pi/2 and pi as hi + lo floats")
    split(mp.pi / 2, 2)
    split(mp.pi, 2)
    ln2h = float(mp.log(2)) / 2 + 1e-3
    # exp(r) = 1 + r + r^2 P(r); weight = r^2/|expm1(r)| so the same P also gives a
    # relatively accurate expm1(r) = r + r^2 P(r) near r = 0 (stricter than exp's r^2/e^r).
    fit("exp", -ln2h, ln2h, lambda r: (mp.exp(r) - 1 - r) / r**2,
        lambda r: r**2 / abs(mp.expm1(r)), range(5))
    # log1p(f) = f + f^2 Q(f), f = m - 1, m in [sqrt(1/2), sqrt(2)).
    fit("log", float(mp.sqrt(0.5)) - 1 - 1e-4, float(mp.sqrt(2)) - 1 + 1e-4,
        lambda f: (mp.log1p(f) - f) / f**2, lambda f: f**2 / abs(mp.log1p(f)), range(9))
    pio4 = float(mp.pi / 4) + 1e-4
    # sin(r) = r + r^3 S(r^2), cos(r) = 1 - r^2/2 + r^4 C(r^2) on |r| <= pi/4.
    fit("sin", 1e-6, pio4, lambda r: (mp.sin(r) - r) / r**3, lambda r: r**3 / mp.sin(r),
        range(4), var=lambda r: r * r)
    fit("cos", 1e-6, pio4, lambda r: (mp.cos(r) - 1 + r * r / 2) / r**4,
        lambda r: r**4 / mp.cos(r), range(4), var=lambda r: r * r)
    # atan(t) = t + t^3 A(t^2) on [0, 1] (|x| > 1 is reduced with 1/x).
    fit("atan", 1e-6, 1.0, lambda t: (mp.atan(t) - t) / t**3, lambda t: t**3 / mp.atan(t),
        range(9), var=lambda t: t * t)
    # asin(x) = x + x^3 B(x^2) on [0, 1/2] (larger |x| is reduced with sqrt((1-|x|)/2)).
    fit("asin", 1e-6, 0.5 + 1e-4, lambda x: (mp.asin(x) - x) / x**3,
        lambda x: x**3 / mp.asin(x), range(5), var=lambda x: x * x)
    # erf(x) = x + x E(x^2) on [0, 0.875] (the leading 1 is exact, so 2/sqrt(pi) is not rounded).
    # Weighted by min(erf, erfc) because gelu needs 1 + erf(-x) = erfc(x) to be accurate too.
    fit("erf", 1e-6, 0.875 + 1e-4, lambda x: mp.erf(x) / x - 1,
        lambda x: x / min(mp.erf(x), mp.erfc(x)), range(8), var=lambda x: x * x)
    # erfc(z) = exp(-z^2) * u * G(u), u = 1/z, for z in [0.875, 10]: two pieces so that a
    # moderate degree suffices; the kernel selects coefficients per lane (no branch).
    def gfun(u):
        z = 1 / u
        return mp.erfc(z) * mp.exp(z * z) * z
    fit("erfc_a", 1 / 2.5, 1 / 0.875 + 1e-4, gfun, lambda u: 1 / gfun(u), range(10))
    fit("erfc_b", 0.1 - 1e-3, 1 / 2.5, gfun, lambda u: 1 / gfun(u), range(10))


if __name__ == "__main__":
    main()
