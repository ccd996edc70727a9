from mpmath import mp, mpf, log, pi, atan, floor, ldexp, frexp
import struct
mp.dps = 120
def f32(v): return struct.unpack('f', struct.pack('f', float(v)))[0]
def rbits(v, bits):
    # round v to `bits` significant bits
    m, e = frexp(v)  # v = m*2^e, 0.5<=|m|<1
    return ldexp(mp.nint(ldexp(m, bits)), e - bits)
def hx(v): return float(v).hex()
ln2 = log(2)
for name, bits, lo in (('64', 42, 'f64'), ('32', 16, 'f32')):
    L1 = rbits(ln2, bits)
    rnd = float if lo == 'f64' else f32
    L2 = mpf(rnd(ln2 - L1))
    L3 = mpf(rnd(ln2 - L1 - L2))
    print(f'// ln2 split {name}: L1 {bits} bits, err after L2 {float(ln2-L1-L2):.3g}, after L3 {float(ln2-L1-L2-L3):.3g}')
    print(f'kLn2_{name} = {{{hx(L1)}, {hx(L2)}, {hx(L3)}}}')
# pi/2 in 22-bit parts (f64 Cody-Waite)
p = pi/2; parts = []
for i in range(4):
    c = rbits(p, 22); parts.append(c); p -= c
parts.append(mpf(float(p))); p -= parts[-1]
print('// pio2 parts', [hx(c) for c in parts], 'residual', float(p))
# 2/pi chunks of 29 bits (truncated), aligned at 2^-29 i
t = 2/pi; ch = []
for i in range(1, 9):
    c = floor(ldexp(t, 29*i)) ; c = ldexp(c, -29*i); ch.append(c); t -= c
print('// 2/pi 29-bit chunks', [hx(c) for c in ch], 'rest', float(t))
def dd(v, rnd):
    h = mpf(rnd(v)); l = mpf(rnd(v - h)); return hx(h), hx(l)
for nm, v in (('pio2', pi/2), ('pi', pi), ('pio4', pi/4), ('atan_half', atan(mpf(1)/2)), ('atan2', atan(2))):
    print(nm, 'f64', dd(v, float), 'f32', dd(v, f32))
print('2/3 f64', dd(mpf(2)/3, float), 'f32', dd(mpf(2)/3, f32))
print('2/5 f64', dd(mpf(2)/5, float), 'f32', dd(mpf(2)/5, f32))
print('1/ln2', hx(1/ln2), hx(f32(1/ln2)), '2/pi', hx(2/pi))
# atan thresholds
from mpmath import sqrt
print('thresholds', float(sqrt(5)-2), float((-1+sqrt(10))/3), float((2+sqrt(40))/6), float(2+sqrt(5)))
