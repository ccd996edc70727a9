#!/usr/bin/env python3
"""Reference values (numpy) and derivatives (JAX) for rune's differential tests.

Writes tests/data/numpy_reference.txt and tests/data/jax_reference.txt, read by
tests/test_numpy_reference.cpp and tests/autodiff/test_jax_reference.cpp. CI needs only the
committed files; run this (see README.md here) when a case or a rule changes.

Line format, fields separated by " | ":
  V <name> <op> <attrs> | <in> [; <in>] | <out> | <ulps>     a value case
  E <name> <op> <attrs> | <in> [; <in>] | <message start>    a case that must raise
  G <name> <fn> <attrs> | <x> ; <w> ; <t> ; <v> | <grad> ; <jvp> ; <hvp> | <rel> <abs>
  (the tolerance: |got - want| <= rel |want| + abs max(1, max |want|); inf and NaN exact; a zero within the abs part)
A tensor is dtype[shape]:bits,bits,... with each element's stored bits in hex (floats exact,
integers two's complement of their width). attrs is key=value,key=value or "-"; a float attr's
value is the hex bits of a float64, so every number in the files is exact.

Value references are computed at float64 (or exactly, for integers) and rounded once to the
case's dtype: for float32/float64 and the 16-bit floats that is the correctly rounded result
except for rare double roundings, so `ulps` is the bound docs/numerics.md gives the op (0: the
same bits). Gradient cases are float64: grad = d/dx sum(f(x) * w), jvp = J t, and
hvp = d/dx sum(grad(x) * v) (a second derivative), all from JAX with x64 enabled.
Where rune's documented rule differs from numpy or JAX (docs/design-notes.md, "Values and
gradients"), the expected value is rune's rule and the case name says so (suffix _rune).
"""
import math
import os
import struct
import sys

import ml_dtypes
import numpy as np

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.special as jsp  # noqa: E402

NP = {
    "bool": np.bool_,
    "uint8": np.uint8,
    "int32": np.int32,
    "int64": np.int64,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float32": np.float32,
    "float64": np.float64,
}
WIDTH = {"bool": 1, "uint8": 1, "int32": 4, "int64": 8, "float16": 2, "bfloat16": 2,
         "float32": 4, "float64": 8}
FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "int32", "int64"]


def to_dtype(vals, dt):
    """float64 (or Python int) values rounded (floats) or wrapped (integers) to dt."""
    if dt in INTS:
        # Exact Python integers, wrapped to the width (a numpy array could round them to float64).
        obj = np.asarray(vals, dtype=object)
        bits = 8 * WIDTH[dt]
        w = [(int(v) % (1 << bits)) for v in obj.reshape(-1)]
        w = [v - (1 << bits) if dt != "uint8" and v >= (1 << (bits - 1)) else v for v in w]
        return np.array(w, dtype=NP[dt]).reshape(obj.shape)
    a = np.asarray(vals)
    if dt in FLOATS:
        a64 = np.asarray(a, dtype=np.float64)
        if dt == "bfloat16":
            # ml_dtypes rounds float64 -> bfloat16 directly (round to nearest even).
            return a64.astype(ml_dtypes.bfloat16)
        return a64.astype(NP[dt])
    return a.astype(np.bool_)


def hexbits(a, dt):
    a = np.ascontiguousarray(a)
    raw = a.astype(NP[dt]).view(np.dtype("u%d" % WIDTH[dt])) if dt != "bool" else a.astype(np.uint8)
    return ",".join("%x" % int(b) for b in raw.reshape(-1))


def tensor(a, dt):
    a = np.asarray(a)
    shape = ",".join(str(s) for s in a.shape)
    return "%s[%s]:%s" % (dt, shape, hexbits(a, dt))


def fattr(x):
    return "%x" % struct.unpack("<Q", struct.pack("<d", float(x)))[0]


def attrs(**kw):
    if not kw:
        return "-"
    out = []
    for k, v in kw.items():
        if isinstance(v, float):
            out.append("%s=%s" % (k, fattr(v)))
        elif isinstance(v, (list, tuple)):
            out.append("%s=%s" % (k, ":".join(str(int(i)) for i in v)))
        else:
            out.append("%s=%s" % (k, int(v)))
    return ",".join(out)


lines = []


def V(name, op, at, ins, out, out_dt, ulps):
    ins_s = " ; ".join(tensor(a, dt) for a, dt in ins)
    lines.append("V %s %s %s | %s | %s | %d" % (name, op, at, ins_s, tensor(out, out_dt), ulps))


def E(name, op, at, ins, msg):
    ins_s = " ; ".join(tensor(a, dt) for a, dt in ins)
    lines.append("E %s %s %s | %s | %s" % (name, op, at, ins_s, msg))


def f64(a):
    return np.asarray(a, dtype=np.float64)


def dmax(dt):
    return float(np.finfo(NP[dt]).max) if dt != "bfloat16" else float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)


def edge(dt):
    """Edge values of a float dtype: zeros, infinities, NaN, +-1, the largest finite, a tiny."""
    big = dmax(dt)
    return [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.75, 2.5, -3.25, 10.0,
            -20.0, big, -big, 1e-6, 0.999, -0.999, 88.0, -90.0]


# ---------------------------------------------------------------- values: elementwise unary

def sigmoid(x):
    xl = np.asarray(x, dtype=np.longdouble)
    with np.errstate(over="ignore"):
        e = np.exp(-np.abs(xl))
        return np.where(xl >= 0, 1 / (1 + e), e / (1 + e)).astype(np.float64)


UNARY = {
    # name: (float64 reference, ulps for float32/float64, ulps for 16-bit floats)
    "exp": (np.exp, 2, 1), "log": (np.log, 2, 1), "tanh": (np.tanh, 2, 1),
    "sin": (np.sin, 2, 1), "cos": (np.cos, 2, 1), "sqrt": (np.sqrt, 0, 0),
    "expm1": (np.expm1, 2, 1), "log1p": (np.log1p, 2, 1), "asin": (np.arcsin, 2, 1),
    "acos": (np.arccos, 2, 1), "atan": (np.arctan, 2, 1), "sinh": (np.sinh, 2, 1),
    "cosh": (np.cosh, 2, 1), "abs": (np.abs, 0, 0), "neg": (np.negative, 0, 0),
    "sign": (lambda x: np.asarray(jnp.sign(jnp.asarray(x))), 0, 0), "floor": (np.floor, 0, 0), "ceil": (np.ceil, 0, 0),
    "square": (np.square, 0, 0), "reciprocal": (np.reciprocal, 0, 0),
    "sigmoid": (sigmoid, 4, 2), "relu": (lambda x: np.where(x > 0, x, np.where(np.isnan(x), x, 0.0)), 0, 0),
    # rsqrt is correctly rounded (docs/numerics.md): 1/sqrt in long double, rounded once, is its
    # value (numpy's 1/np.sqrt(x) rounds twice: 1 ulp off for about a quarter of float32 inputs).
    "rsqrt": (lambda x: (1 / np.sqrt(np.asarray(x, dtype=np.longdouble))).astype(np.float64), 0, 0),
    # numpy has no erfc: Python's math.erfc (libm's double erfc, within about an ulp).
    "erfc": (np.vectorize(math.erfc, otypes=[np.float64]), 2, 1),
}


def gen_unary():
    with np.errstate(all="ignore"):
        for op, (ref, u_full, u_half) in UNARY.items():
            for dt in FLOATS:
                x = to_dtype(edge(dt), dt)
                # float64 evaluation rounded once to dt: for square and reciprocal of the narrower
                # dtypes that is the exact result's rounding (the float64 result is exact enough).
                y = ref(f64(x))
                ulps = u_half if dt in ("float16", "bfloat16") else u_full
                V("%s_%s" % (op, dt), op, "-", [(x, dt)], to_dtype(y, dt), dt, ulps)
            for dt in INTS + ["bool"]:
                if op not in ("abs", "neg", "sign", "square", "relu"):
                    continue
                if dt == "bool" and op != "abs":
                    continue
                vals = {"uint8": [0, 1, 7, 200, 255], "int32": [0, 1, -1, 7, -2147483648, 2147483647, -5],
                        "int64": [0, 1, -1, -(1 << 63), (1 << 63) - 1, 12345678901],
                        "bool": [0, 1]}[dt]
                x = to_dtype(vals, dt)
                py = [int(v) for v in x.reshape(-1)]
                f = {"abs": abs, "neg": lambda v: -v, "sign": lambda v: (v > 0) - (v < 0),
                     "square": lambda v: v * v, "relu": lambda v: max(v, 0)}[op]
                V("%s_%s" % (op, dt), op, "-", [(x, dt)], to_dtype([f(v) for v in py], dt), dt, 0)


def gen_classify():
    """isinf, isfinite: bool results; integers and bool are never infinite."""
    fns = {"isinf": np.isinf, "isfinite": np.isfinite}
    for op in ("isinf", "isfinite"):
        for dt in FLOATS:
            x = to_dtype(edge(dt), dt)
            V("%s_%s" % (op, dt), op, "-", [(x, dt)], fns[op](f64(x)), "bool", 0)
        for dt in INTS + ["bool"]:
            x = to_dtype([0, 1, 7] if dt != "bool" else [0, 1], dt)
            V("%s_%s" % (op, dt), op, "-", [(x, dt)], fns[op](x), "bool", 0)


# --------------------------------------------------------------- values: elementwise binary

def max_signed(a, b):
    """numpy's maximum, with -0 ordered below +0 (JAX; numpy's answer depends on operand order)."""
    r = np.maximum(a, b)
    z = (a == 0) & (b == 0)
    return np.where(z, np.where(np.signbit(a) & np.signbit(b), a, np.abs(a)), r)


def min_signed(a, b):
    r = np.minimum(a, b)
    z = (a == 0) & (b == 0)
    return np.where(z, np.where(np.signbit(a) | np.signbit(b), -np.abs(a), a), r)


def gen_binary():
    base = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 2.5, -3.0, 0.5, 7.0]
    a = np.array([p for p in base for q in base])
    b = np.array([q for p in base for q in base])
    refs = {
        "add": (np.add, 0), "sub": (np.subtract, 0), "mul": (np.multiply, 0),
        "div": (np.divide, 0), "maximum": (max_signed, 0), "minimum": (min_signed, 0),
        "mod": (np.mod, 0), "pow": (np.power, 2), "atan2": (np.arctan2, 2),
    }
    with np.errstate(all="ignore"):
        for op, (ref, ulps) in refs.items():
            for dt in ["float16", "float32", "float64"]:
                x, y = to_dtype(a, dt), to_dtype(b, dt)
                r = ref(f64(x), f64(y))
                if op in ("add", "sub", "mul", "div", "mod", "maximum", "minimum"):
                    r = ref(x, y)  # one IEEE operation at the dtype
                u = ulps if dt == "float64" or dt == "float32" else min(ulps, 1)
                V("%s_%s" % (op, dt), op, "-", [(x, dt), (y, dt)], to_dtype(f64(r), dt), dt, u)
        # Comparisons, including NaN and signed zeros.
        for op, ref in {"less": np.less, "less_equal": np.less_equal, "greater": np.greater,
                        "greater_equal": np.greater_equal, "equal": np.equal,
                        "not_equal": np.not_equal}.items():
            x, y = to_dtype(a, "float32"), to_dtype(b, "float32")
            V("%s_float32" % op, op, "-", [(x, "float32"), (y, "float32")], ref(x, y), "bool", 0)
    # Integers: wrapping add/sub/mul, floor division and modulo (0 for a zero divisor).
    iv = {"uint8": [0, 1, 2, 7, 128, 200, 255], "int32": [0, 1, -1, 7, -7, 2147483647, -2147483648],
          "int64": [0, 1, -1, 9, -9, (1 << 63) - 1, -(1 << 63)]}
    for dt, vals in iv.items():
        pa = [p for p in vals for q in vals]
        pb = [q for p in vals for q in vals]

        def fdiv(p, q):
            if q == 0:
                return 0
            return p // q

        def fmod(p, q):
            if q == 0:
                return 0
            return p - q * (p // q)

        for op, f in {"add": lambda p, q: p + q, "sub": lambda p, q: p - q,
                      "mul": lambda p, q: p * q, "div": fdiv, "mod": fmod,
                      "maximum": max, "minimum": min}.items():
            V("%s_%s" % (op, dt), op, "-", [(to_dtype(pa, dt), dt), (to_dtype(pb, dt), dt)],
              to_dtype([f(p, q) for p, q in zip(pa, pb)], dt), dt, 0)
        V("less_%s" % dt, "less", "-", [(to_dtype(pa, dt), dt), (to_dtype(pb, dt), dt)],
          np.array([p < q for p, q in zip(pa, pb)]), "bool", 0)


# ------------------------------------------------------------------ values: weak scalars

def gen_scalars():
    xi = np.array([-3, -1, 0, 1, 2, 7, 2147483647], dtype=np.int32)
    # A float scalar with an integer tensor: float32 arithmetic (JAX), float64 comparisons.
    for op, s in [("mul_s", 2.5), ("add_s", 0.5), ("sub_s", 0.25), ("div_s", 2.0 + 0.5)]:
        f = {"mul_s": np.multiply, "add_s": np.add, "sub_s": np.subtract, "div_s": np.divide}[op]
        r = f(xi.astype(np.float32), np.float32(s))
        V("%s_int32_float" % op, op, attrs(s=s), [(xi, "int32")], r, "float32", 0)
    for op, s in [("lt_s", 0.1), ("gt_s", -0.5), ("le_s", 2147483646.5), ("ge_s", 0.0)]:
        f = {"lt_s": np.less, "gt_s": np.greater, "le_s": np.less_equal, "ge_s": np.greater_equal}[op]
        V("%s_int32_float" % op, op, attrs(s=s), [(xi, "int32")], f(xi.astype(np.float64), s), "bool", 0)
    # An integral scalar keeps an integer tensor's dtype; out of its range it raises.
    xu = np.array([0, 1, 100, 255], dtype=np.uint8)
    V("add_i_uint8", "add_i", attrs(i=3), [(xu, "uint8")], (xu + np.uint8(3)), "uint8", 0)
    E("add_i_uint8_300", "add_i", attrs(i=300), [(xu, "uint8")], "nx::add: integer scalar 300 is out of range")
    E("mul_i_int32_big", "mul_i", attrs(i=1 << 40), [(xi, "int32")], "nx::mul: integer scalar 1099511627776 is out of range")
    E("sub_i_uint8_neg", "sub_i", attrs(i=-1), [(xu, "uint8")], "nx::sub: integer scalar -1 is out of range")
    # ... but a comparison with it is still answered (numpy 2), at float64.
    V("lt_i_uint8_300", "lt_i", attrs(i=300), [(xu, "uint8")], np.ones(4, dtype=bool), "bool", 0)
    # bool tensors with an integral scalar count in int32 (JAX: True + 1 is int32 2).
    xb = np.array([True, False, True])
    V("add_i_bool", "add_i", attrs(i=1), [(xb, "bool")], xb.astype(np.int32) + 1, "int32", 0)
    # Float tensors take either scalar at their own dtype.
    xh = to_dtype([1.0, 65504.0, -2.0], "float16")
    with np.errstate(over="ignore"):
        V("mul_s_float16", "mul_s", attrs(s=2.5), [(xh, "float16")], xh * np.float16(2.5), "float16", 0)
    V("add_i_float16", "add_i", attrs(i=3), [(xh, "float16")], xh + np.float16(3), "float16", 0)


# ----------------------------------------------------------------------- values: reductions

def gen_reductions():
    rng = np.random.default_rng(16)
    with np.errstate(all="ignore"):
        # mean of float16 rounds once: [65504, 65504] is 65504 (it was inf).
        x = to_dtype([65504.0, 65504.0], "float16")
        V("mean_float16_max", "mean", attrs(axes=[0], keep=0), [(x, "float16")],
          to_dtype(f64(x).astype(np.float32).sum(dtype=np.float32) / np.float32(2), "float16"), "float16", 0)
        for dt in FLOATS:
            m = rng.standard_normal((3, 5)) * 4
            m[0, 1] = 0.0
            m[2, 3] = -0.0
            x = to_dtype(m, dt)
            acc = np.float32 if dt in ("float16", "bfloat16") else NP[dt]
            for axes in ([0], [1], [0, 1]):
                ax = tuple(axes)
                xs = f64(x).astype(acc)
                # The reference adds in C order; rune's documented order (docs/numerics.md) differs
                # for float32/float64, so those get the (n - 1)-ulp bound of a 3-term sum.
                su = 0 if dt in ("float16", "bfloat16") else 2
                V("sum_%s_%s" % (dt, "".join(map(str, axes))), "sum", attrs(axes=axes, keep=0),
                  [(x, dt)], to_dtype(f64(_ordered_sum(xs, ax, acc)), dt), dt, su)
                V("max_%s_%s" % (dt, "".join(map(str, axes))), "max", attrs(axes=axes, keep=1),
                  [(x, dt)], np.max(x, axis=ax, keepdims=True), dt, 0)
                mean = _ordered_sum(xs, ax, acc) / acc(np.prod([x.shape[a] for a in ax]))
                V("mean_%s_%s" % (dt, "".join(map(str, axes))), "mean", attrs(axes=axes, keep=0),
                  [(x, dt)], to_dtype(f64(mean), dt), dt, su)
            # Composites at float32 (16-bit) or their dtype: within a few ulps of the exact value.
            u = 2 if dt in ("float16", "bfloat16") else 4
            rows = np.array([[1.0, 2.0, 3.0, -1.0], [1.0, 2.0, math.inf, 0.0],
                             [-math.inf, -math.inf, -math.inf, -math.inf], [1.0, math.nan, 0.0, 2.0],
                             [-math.inf, 0.5, -math.inf, 1.0], [100.0, 100.0, -100.0, 50.0]])
            x = to_dtype(rows, dt)
            # logsumexp: JAX/scipy's values (inf for a row holding +inf, -inf for a row of -inf).
            lse = np.array(jsp.logsumexp(jnp.asarray(f64(x)), axis=1, keepdims=True))
            assert np.array_equal(np.isfinite(lse), np.isfinite(_lse_ld(x))), "rule differs"
            V("logsumexp_%s" % dt, "logsumexp", attrs(axes=[1], keep=1), [(x, dt)],
              to_dtype(_lse_ld(x).astype(np.float64), dt), dt, u)
            # softmax and log_softmax of a row holding +inf: rune gives each other element its
            # limit (0, -inf) and NaN at the inf (inf - inf), so exp(log_softmax) = softmax; JAX
            # and scipy shift by the inf and give NaN across the row (docs/design-notes.md).
            xl = np.asarray(x, dtype=np.longdouble)
            sh = xl - _finite_max(xl)
            e = np.exp(sh)
            sm = e / e.sum(axis=1, keepdims=True)
            V("softmax_%s_rune" % dt, "softmax", attrs(axis=1), [(x, dt)], to_dtype(sm.astype(np.float64), dt), dt, u)
            ls = sh - np.log(e.sum(axis=1, keepdims=True))
            V("log_softmax_%s_rune" % dt, "log_softmax", attrs(axis=1), [(x, dt)],
              to_dtype(ls.astype(np.float64), dt), dt, u)
        # Empty axes: logsumexp -inf (scipy/JAX), softmax and log_softmax empty, sum 0, prod 1, mean NaN.
        for dt in ["float32", "float16"]:
            e = np.zeros((3, 0), dtype=NP[dt])
            V("logsumexp_empty_%s" % dt, "logsumexp", attrs(axes=[1], keep=0), [(e, dt)],
              to_dtype([-math.inf] * 3, dt), dt, 0)
            V("softmax_empty_%s" % dt, "softmax", attrs(axis=1), [(e, dt)], e, dt, 0)
            V("log_softmax_empty_%s" % dt, "log_softmax", attrs(axis=-1), [(e, dt)], e, dt, 0)
            V("sum_empty_%s" % dt, "sum", attrs(axes=[1], keep=0), [(e, dt)], np.zeros(3, NP[dt]), dt, 0)
            V("prod_empty_%s" % dt, "prod", attrs(axes=[1], keep=0), [(e, dt)], np.ones(3, NP[dt]), dt, 0)
            V("mean_empty_%s" % dt, "mean", attrs(axes=[1], keep=0), [(e, dt)], to_dtype([math.nan] * 3, dt), dt, 0)
            V("logsumexp_empty_all_%s" % dt, "logsumexp", attrs(axes=[], keep=0), [(e, dt)],
              to_dtype(-math.inf, dt), dt, 0)
        E("max_empty", "max", attrs(axes=[1], keep=0), [(np.zeros((2, 0), np.float32), "float32")],
          "nx::max: zero-size reduction")
        E("logsumexp_bad_axis", "logsumexp", attrs(axes=[2], keep=0), [(np.zeros((2, 3), np.float32), "float32")],
          "nx::logsumexp: axis 2 out of range")
        E("softmax_bad_axis", "softmax", attrs(axis=-3), [(np.zeros((2, 3), np.float32), "float32")],
          "nx::softmax: axis -3 out of range")
        E("stack_bad_axis", "stack2", attrs(axis=3), [(np.zeros((2, 3), np.float32), "float32")],
          "nx::stack: axis 3 out of range")
        # Integer and bool reductions accumulate in int64.
        x = np.array([[200, 100, 255], [0, 1, 2]], dtype=np.uint8)
        V("sum_uint8", "sum", attrs(axes=[1], keep=0), [(x, "uint8")], x.astype(np.int64).sum(1), "int64", 0)
        V("prod_uint8", "prod", attrs(axes=[1], keep=0), [(x, "uint8")], x.astype(np.int64).prod(1), "int64", 0)
        V("mean_uint8", "mean", attrs(axes=[1], keep=0), [(x, "uint8")], x.astype(np.float64).sum(1) / 3, "float64", 0)
        xb = np.array([[True, False, True], [True, True, True]])
        V("sum_bool", "sum", attrs(axes=[1], keep=0), [(xb, "bool")], xb.sum(1).astype(np.int64), "int64", 0)
        # prod with zeros, infinities and NaN (values).
        p = to_dtype([[2.0, 0.0, 4.0], [math.inf, 0.0, 1.0], [math.nan, 1.0, 2.0], [-0.0, 3.0, 1.0]], "float32")
        V("prod_float32_specials", "prod", attrs(axes=[1], keep=0), [(p, "float32")], np.prod(p, axis=1), "float32", 0)


def _finite_max(xl):
    m = np.max(xl, axis=1, keepdims=True)
    return np.where(np.isfinite(m), m, 0)


def _lse_ld(x):
    """logsumexp over axis 1 at long double (64-bit significand on x86), shifted by the finite max."""
    xl = np.asarray(x, dtype=np.longdouble)
    m = _finite_max(xl)
    return np.log(np.exp(xl - m).sum(axis=1, keepdims=True)) + m


def _ordered_sum(xs, axes, acc):
    """Sums xs over axes in C order of the reduced elements, one rounding per step from +0."""
    moved = np.moveaxis(xs, axes, list(range(xs.ndim - len(axes), xs.ndim)))
    kept = moved.shape[: xs.ndim - len(axes)]
    flat = moved.reshape(kept + (-1,))
    out = np.zeros(kept, dtype=acc)
    for i in range(flat.shape[-1]):
        out = (out + flat[..., i]).astype(acc)
    return out


# --------------------------------------------------------------------------- values: matmul

def gen_matmul():
    # Integers: exact int64 products and sums, int64 result (numpy keeps the input dtype and
    # wraps: int32 [[2147483647, 2]] @ [[2], [3]] is -2 + 6 = 4 there, 4294967300 here).
    cases = [("int32", [[2147483647, 2]], [[2], [3]]), ("uint8", [[255, 2]], [[2], [3]]),
             ("int64", [[3, -4, 5], [1, 2, 3]], [[1, 2], [3, 4], [5, 6]]),
             ("uint8", [[255, 255, 255, 255]], [[255], [255], [255], [255]])]
    for dt, a, b in cases:
        r = [[sum(int(x) * int(y) for x, y in zip(row, col)) for col in zip(*b)] for row in a]
        V("matmul_%s_rune" % dt, "matmul", "-", [(to_dtype(a, dt), dt), (to_dtype(b, dt), dt)],
          to_dtype(r, "int64"), "int64", 0)
    # dot of two vectors follows the same rule.
    V("dot_int32_rune", "dot", "-", [(to_dtype([2147483647, 2], "int32"), "int32"), (to_dtype([2, 3], "int32"), "int32")],
      np.array(2147483647 * 2 + 6, dtype=np.int64), "int64", 0)
    # bool @ bool is bool (numpy, JAX): any a[i,k] and b[k,j].
    a = np.array([[True, False, True], [False, False, False]])
    b = np.array([[True, False], [True, True], [False, False]])
    V("matmul_bool", "matmul", "-", [(a, "bool"), (b, "bool")], a @ b, "bool", 0)
    V("dot_bool", "dot", "-", [(a[0], "bool"), (b[:, 1], "bool")], np.dot(a[0], b[:, 1]), "bool", 0)
    # float16: float32 accumulation, one rounding (65504 * 1 + 65504 * -1 + 1 * 1 is 1, not NaN).
    a = to_dtype([[65504.0, 65504.0, 1.0]], "float16")
    b = to_dtype([[1.0], [-1.0], [1.0]], "float16")
    V("matmul_float16", "matmul", "-", [(a, "float16"), (b, "float16")], to_dtype([[1.0]], "float16"), "float16", 0)
    V("dot_float16", "dot", "-", [(a[0], "float16"), (b[:, 0], "float16")], to_dtype(1.0, "float16"), "float16", 0)


# ---------------------------------------------------------------------- gradients (JAX)

glines = []


def G(name, fn, at, f, x, seed=0):
    """grad, jvp and hvp of f at x (float64) with fixed random w, t and v."""
    x = jnp.asarray(np.asarray(x, dtype=np.float64))
    r = np.random.default_rng(1000 + seed)
    y = f(x)
    w = jnp.asarray(r.uniform(0.5, 1.5, np.shape(y)))
    t = jnp.asarray(r.uniform(-1.0, 1.0, x.shape))
    v = jnp.asarray(r.uniform(0.5, 1.5, x.shape))
    g = jax.grad(lambda z: jnp.sum(f(z) * w))
    gx = g(x)
    _, jv = jax.jvp(f, (x,), (t,))
    hv = jax.grad(lambda z: jnp.sum(g(z) * v))(x)
    tt = lambda a: tensor(np.asarray(a, dtype=np.float64), "float64")  # noqa: E731
    glines.append("G %s %s %s | %s ; %s ; %s ; %s | %s ; %s ; %s | %g %g" % (
        name, fn, at, tt(x), tt(w), tt(t), tt(v), tt(gx), tt(jv), tt(hv), REL, ABS))


# XLA's float64 tanh, logistic and exp on the CPU are vectorised approximations (tanh'' at 1e-8
# is 7.7e-9 off the long-double value, sigmoid' at -30 1e-3 relatively): the bound on gradients.
REL, ABS = 1e-7, 1e-12


def gen_grads():
    pts = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -3.0, 1e-8, 0.25]
    pos = [0.5, 1.0, 2.5, 1e-3, 10.0, 0.0]
    unit = [0.0, 0.5, -0.5, 0.9, -0.9, 0.999999, -0.999999, 0.99999999, -0.99999999, 1 - 2**-30]
    G("exp", "exp", "-", jnp.exp, pts)
    G("log", "log", "-", jnp.log, pos)
    G("tanh", "tanh", "-", jnp.tanh, pts + [20.0, -20.0])
    G("sigmoid", "sigmoid", "-", jax.nn.sigmoid, pts + [30.0, -30.0, -745.0])
    G("sqrt", "sqrt", "-", jnp.sqrt, [0.25, 1.0, 4.0, 9.5])
    G("rsqrt", "rsqrt", "-", jax.lax.rsqrt, [0.25, 1.0, 4.0, 9.5, 1e-3, 1e6])
    G("erfc", "erfc", "-", jsp.erfc, pts + [3.0, 5.0, -4.0, 26.0])
    # abs'(0) is 0 in rune (the subgradient of least norm, as PyTorch and TF; JAX gives 1 at
    # both zeros): the reference is sign(x) * x, abs with that derivative.
    G("abs_rune", "abs", "-", lambda z: jnp.sign(z) * z, pts)
    G("sign_times_x", "sign_x", "-", lambda z: jnp.sign(z) * z, pts)
    G("sign", "sign", "-", jnp.sign, pts + [math.nan])
    G("relu", "relu", "-", jax.nn.relu, pts)
    G("floor", "floor", "-", jnp.floor, pts)
    for c in [0.0, 0.5, -1.0]:
        G("maximum_%g" % c, "maximum_c", attrs(c=c), lambda z, c=c: jnp.maximum(z, c), pts)
        G("minimum_%g" % c, "minimum_c", attrs(c=c), lambda z, c=c: jnp.minimum(z, c), pts)
    G("clip", "clip", attrs(lo=-1.0, hi=0.5), lambda z: jnp.clip(z, -1.0, 0.5), pts)
    G("asin", "asin", "-", jnp.arcsin, unit)
    G("acos", "acos", "-", jnp.arccos, unit)
    for c in [2.0, 3.0, 0.5, -1.0, 2.5]:
        base = [0.0, 0.5, 1.0, 2.0, 3.5] if c >= 1 else [0.5, 1.0, 2.0, 3.5]
        G("pow_x_%g" % c, "pow_xc", attrs(c=c), lambda z, c=c: jnp.power(z, c), base)
    # x^0 is constant and x^1 is x, so their derivatives at x = 0 are 0 and 1 and their second
    # derivatives 0 in rune; JAX computes 0 * 0^-1 there and gives NaN (docs/design-notes.md).
    G("pow_x_0_rune", "pow_xc", attrs(c=0.0), lambda z: jnp.ones_like(z), [0.0, 0.5, 1.0, 2.0, 3.5])
    G("pow_x_1_rune", "pow_xc", attrs(c=1.0), lambda z: z, [0.0, 0.5, 1.0, 2.0, 3.5])
    for c in [2.0, 0.5, 0.0]:
        G("pow_c_%g" % c, "pow_cx", attrs(c=c), lambda z, c=c: jnp.power(c, z), [0.5, 1.0, 2.0, 3.0])
    rows = [[1.0, 2.0, 3.0, -1.0], [0.5, 0.5, 0.5, 0.5], [10.0, -10.0, 0.0, 1.0]]
    G("softmax", "softmax", attrs(axis=1), lambda z: jax.nn.softmax(z, axis=1), rows)
    G("log_softmax", "log_softmax", attrs(axis=1), lambda z: jax.nn.log_softmax(z, axis=1), rows)
    G("logsumexp", "logsumexp", attrs(axes=[1]), lambda z: jsp.logsumexp(z, axis=1), rows)
    G("mean", "mean", attrs(axes=[1]), lambda z: jnp.mean(z, axis=1), rows)
    G("sum", "sum", attrs(axes=[0]), lambda z: jnp.sum(z, axis=0), rows)
    # prod: no zero, one zero, two zeros, inf, NaN; along the last axis, the first, and both.
    prows = [[2.0, 3.0, 4.0], [2.0, 0.0, 4.0], [0.0, 5.0, 0.0], [2.0, math.inf, 4.0], [1.5, math.nan, 2.0]]
    for i, row in enumerate(prows):
        G("prod_row%d" % i, "prod", attrs(axes=[0]), lambda z: jnp.prod(z, axis=0), row, seed=i)
    G("prod_axis1", "prod", attrs(axes=[1]), lambda z: jnp.prod(z, axis=1), prows[:3])
    G("prod_axis0", "prod", attrs(axes=[0]), lambda z: jnp.prod(z, axis=0), [[2.0, 0.0], [3.0, 4.0], [0.5, 0.0]])
    G("prod_all", "prod", attrs(axes=[0, 1]), lambda z: jnp.prod(z), [[2.0, 0.0], [3.0, 4.0]])
    G("prod_long", "prod", attrs(axes=[0]), lambda z: jnp.prod(z, axis=0),
      [1.0 + 0.01 * i for i in range(37)] + [0.0] + [0.9] * 5)
    # logsumexp with +inf: value inf, gradient 0 except NaN at the inf (JAX).
    G("logsumexp_inf", "logsumexp", attrs(axes=[0]), lambda z: jsp.logsumexp(z, axis=0), [1.0, 2.0, math.inf])


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    gen_unary()
    gen_classify()
    gen_binary()
    gen_scalars()
    gen_reductions()
    gen_matmul()
    gen_grads()
    head = ("# Generated by tools/refgen/gen_reference.py (numpy %s, jax %s); do not edit.\n"
            % (np.__version__, jax.__version__))
    with open(os.path.join(root, "tests", "data", "numpy_reference.txt"), "w") as f:
        f.write(head + "\n".join(lines) + "\n")
    with open(os.path.join(root, "tests", "data", "jax_reference.txt"), "w") as f:
        f.write(head + "\n".join(glines) + "\n")
    print("%d value cases, %d gradient cases" % (len(lines), len(glines)), file=sys.stderr)


if __name__ == "__main__":
    main()
