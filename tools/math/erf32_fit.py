# float32 erf evaluated in float64: three pieces of one degree-10 Horner scheme whose coefficients
# are selected per lane. small: erf x = x G(z), z = x^2, |x| < 1.25; mid: erf(1.8125 + t) on
# [1.25, 2.375); tail: erf(3.125 + t) on [2.375, 3.92].
from mpmath import mp, mpf, erf, chebyfit, log, sqrt, fabs
mp.dps = 40
DEG = 10
g = lambda z: erf(sqrt(z))/sqrt(z) if z > 0 else 2/sqrt(mp.pi)
PIECES = [('small', g, 0, mpf('1.25')**2, 0), ('mid', erf, mpf('1.25'), mpf('2.375'), mpf('1.8125')),
          ('tail', erf, mpf('2.375'), mpf('3.92'), mpf('3.125'))]
rows = []
for name, f, a, b, c in PIECES:
    p = chebyfit(lambda t: f(c + t), [a - c, b - c], DEG + 1)
    co = [float(v) for v in reversed(p)]
    rows.append(co)
    worst = mpf(0)
    for i in range(4001):
        u = a + (b - a) * i / 4000
        t = u - c
        s = mpf(0)
        for v in reversed(co): s = s * t + mpf(v)
        err = fabs(s - f(u)) / (fabs(f(u)) if name == 'small' else 1)
        worst = max(worst, err)
    print('// %s: %s error with the rounded coefficients 2^%.1f' % (name, 'relative' if name == 'small' else 'absolute', float(log(worst, 2))))
print('constexpr double kErf32P[3][%d] = {' % (DEG + 1))
for r in rows: print('    {' + ', '.join(v.hex() for v in r) + '},')
print('};')
