# Fits for erfc in codegen/decompose_math.cpp (kErfcH*): h(x) = erfc(x) e^(x^2) on pieces of
# [1/2, 27.5], each a polynomial in t = x - centre (Chebyshev fit, near minimax), coefficients
# rounded to float64, the constant and linear terms also as hi + lo. Prints the C++ tables and, per piece,
# the relative error of the rounded polynomial on a dense grid (exact arithmetic).
#   python3 tools/math/erfc_fit.py
from mpmath import mp, mpf, erfc, exp, chebyfit, log, fabs
mp.dps = 50
DEG = 17
# [start, end), centre (a short binary fraction, so t = x - centre is exact by Sterbenz).
PIECES = [(0.5, 1.25, 0.875), (1.25, 2.25, 1.75), (2.25, 3.5, 2.875), (3.5, 5, 4.25),
          (5, 7, 6), (7, 10, 8.5), (10, 14.5, 12.25), (14.5, 20.5, 17.5), (20.5, 27.5, 24)]
h = lambda x: erfc(x) * exp(x * x)
rows, lows, worst = [], [], []
for a, b, c in PIECES:
    a, b, c = mpf(a), mpf(b), mpf(c)
    poly = chebyfit(lambda t: h(c + t), [a - c, b - c], DEG + 1)  # highest degree first
    co = list(reversed(poly))
    r = [float(v) for v in co]
    lo = (float(co[0] - mpf(r[0])), float(co[1] - mpf(r[1])))
    rows.append(r); lows.append(lo)
    e = mpf(0)
    for i in range(2001):
        x = a + (b - a) * i / 2000
        t = x - c
        s = mpf(0)
        for v in reversed(r[2:]): s = s * t + mpf(v)
        s = (mpf(r[0]) + mpf(lo[0])) + t * (mpf(r[1]) + mpf(lo[1]) + t * s)
        e = max(e, fabs(s / h(x) - 1))
    worst.append(float(log(e, 2)))
print('// relative error per piece, rounded coefficients: ' +
      ', '.join('2^%.1f' % w for w in worst))
print('constexpr double kErfcHStart[] = {' + ', '.join(repr(float(p[0])) for p in PIECES) + '};')
print('constexpr double kErfcHCentre[] = {' + ', '.join(repr(float(p[2])) for p in PIECES) + '};')
print('constexpr double kErfcHLo[][2] = {' + ', '.join('{%s, %s}' % (v[0].hex(), v[1].hex()) for v in lows) + '};')
print('constexpr double kErfcH[%d][%d] = {' % (len(PIECES), DEG + 1))
for r in rows:
    print('    {' + ', '.join(v.hex() for v in r) + '},')
print('};')
