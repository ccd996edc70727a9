# Minimax (relative error) polynomial fits for codegen/decompose_math.cpp, written from scratch.
import sys
from mpmath import mp, mpf, matrix, lu_solve, cos, pi, log, sqrt, factorial, fabs, exp
mp.dps = 40

def series(coef, x, n=80):
    if x == 0: return coef(0)
    return sum(coef(k) * x**k for k in range(n))

FUNCS = {
  # e^r - 1 - r - r^2/2 = r^3 P(r)
  'expm1_p': lambda r: series(lambda k: 1/factorial(k+3), r, 40),
  # 2 atanh(s) = 2s + s*z*R1(z), z = s^2
  'log_r1': lambda z: series(lambda k: mpf(2)/(2*k+3), z, 60),
  # Q(z) = 2/3 + 2z/5 + z^2 Q2(z)
  'log_q2': lambda z: series(lambda k: mpf(2)/(2*k+7), z, 60),
  # sin r = r + r z S(z)
  'sin_s': lambda z: series(lambda k: (-1)**(k+1)/factorial(2*k+3), z, 40),
  # cos r = 1 - z/2 + z^2 C(z)
  'cos_c': lambda z: series(lambda k: (-1)**k/factorial(2*k+4), z, 40),
  # atan t = t + t z A(z)
  'atan_a': lambda z: series(lambda k: mpf((-1)**(k+1))/(2*k+3), z, 120),
}

def poly(c, x):
    s = mpf(0)
    for a in reversed(c): s = s*x + a
    return s

def remez(f, a, b, deg, iters=40):
    n = deg + 1
    xs = sorted([(a+b)/2 - (b-a)/2*cos(pi*i/n) for i in range(n+1)])
    grid = [a + (b-a)*i/3000 for i in range(3001)]
    fg = [f(x) for x in grid]
    fgrid = dict(zip(grid, fg))
    best = None
    prev = None
    for it in range(iters):
        A = matrix(n+1, n+1); rhs = matrix(n+1, 1)
        for i, x in enumerate(xs):
            fx = fgrid[x] if x in fgrid else f(x)
            for j in range(n): A[i, j] = x**j
            A[i, n] = (-1)**i * fabs(fx)
            rhs[i] = fx
        sol = lu_solve(A, rhs)
        c = [sol[j] for j in range(n)]
        ev = [(poly(c, x) - fx) / fabs(fx) for x, fx in zip(grid, fg)]
        # split into sign runs, take extremum of each run
        runs = []
        cur = [0]
        for i in range(1, len(grid)):
            if (ev[i] >= 0) == (ev[cur[0]] >= 0): cur.append(i)
            else: runs.append(cur); cur = [i]
        runs.append(cur)
        ext = [max(r, key=lambda i: fabs(ev[i])) for r in runs]
        while len(ext) > n+1:
            # drop the smaller end
            if fabs(ev[ext[0]]) < fabs(ev[ext[-1]]): ext.pop(0)
            else: ext.pop()
        mx = max(fabs(e) for e in ev)
        if len(ext) == n+1:
            xs = [grid[i] for i in ext]
        best = (c, mx)
        if prev is not None and fabs(mx - prev) < mx * mpf('1e-4'): break
        prev = mx
    return best

def rnd(v, kind):
    import struct
    if kind == 'f32':
        return struct.unpack('f', struct.pack('f', float(v)))[0]
    return float(v)

def report(name, fname, a, b, deg, kind):
    f = FUNCS[fname]
    c, mx = remez(f, mpf(a), mpf(b), deg)
    cr = [rnd(x, kind) for x in c]
    grid = [mpf(a) + (mpf(b)-mpf(a))*i/3000 for i in range(3001)]
    mr = max(fabs((poly([mpf(x) for x in cr], x) - f(x))/f(x)) for x in grid)
    print(f'// {name}: {fname} on [{a}, {b}] deg {deg}: minimax rel err 2^{float(log(mx,2)):.1f}, '
          f'with {kind} coefficients 2^{float(log(mr,2)):.1f}')
    suffix = 'f' if kind == 'f32' else ''
    print(f'constexpr double {name}[] = {{' + ', '.join(x.hex() for x in cr) + '};')
    sys.stdout.flush()

if __name__ == '__main__':
    L = float(log(2)/2 * mpf('1.0005'))
    smax = (sqrt(2)-1)/(sqrt(2)+1)
    zlog = float(smax**2 * mpf('1.002'))
    zsc = float((pi/4*mpf('1.0002'))**2)
    zat = float(mpf('0.2503')**2)
    which = sys.argv[1:]
    jobs = {
      'expm1_64': ('kExpm1P64', 'expm1_p', -L, L, int(which[1]) if len(which)>1 else 9, 'f64'),
    }
    import itertools
    for spec in which[0].split(','):
        name, fn, a, b, deg, kind = spec.split(':')
        a = {'-L': -L, 'L': L, 'zlog': zlog, 'zsc': zsc, 'zat': zat, '0': 0.0}[a]
        b = {'-L': -L, 'L': L, 'zlog': zlog, 'zsc': zsc, 'zat': zat, '0': 0.0}[b]
        report(name, fn, a, b, int(deg), kind)
