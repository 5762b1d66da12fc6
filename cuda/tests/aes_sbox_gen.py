#!/usr/bin/env python3
"""aes_sbox_gen.py - derives the bitsliced AES S-box circuit used in cuda/aes_bs.cuh.

Math
  S(x) = A * x^-1 + 0x63 with the inverse in GF(2^8) = GF(2)[x]/(x^8+x^4+x^3+x+1).
  The inverse is computed in an isomorphic tower GF(((2^2)^2)^2) with normal bases
  {W^2, W} over GF(2), {Z^4, Z} over GF(4) (Z^2 + Z + N), {Y^16, Y} over GF(16)
  (Y^2 + Y + V): for x = a1 Y^16 + a0 Y, the norm n = a1 a0 + (a1 + a0)^2 V is in
  GF(16) and x^-1 = (a0 n^-1) Y^16 + (a1 n^-1) Y.  GF(16) products use Karatsuba over
  GF(4) (9 ANDs of 9 linear forms of each factor); the GF(16) inversion of n is a
  7-gate LOP3 circuit found by SAT-based exact synthesis (6 gates is UNSAT).  The
  basis change into the tower (a root of the AES polynomial) and the output map
  A * (basis change back) are linear layers optimised by a Boyar-Peralta style greedy
  heuristic; then an exact (CP-SAT) area-optimal cover of the 2-input gate DAG by
  3-input cuts gives one LOP3 per cut (duplication allowed).
  The circuit omits the affine constant 0x63 (aes_bs.cuh folds it into the round keys).

Output
  C statements `const uint32_t gN = lop3<LUT>(a, b, c);` over inputs u0..u7 (bit 0 =
  LSB) and the assignments s0..s7, for the GCMX_SBOX block of cuda/aes_bs.cuh.  Every
  printed circuit is checked here on all 256 inputs; cuda/tests/aes_host_check.cu checks
  the spliced copy again.

Usage
  python3 cuda/tests/aes_sbox_gen.py                # the circuit in aes_bs.cuh (70 LOP3)
  python3 cuda/tests/aes_sbox_gen.py --search 600   # random search over towers / seeds
  python3 cuda/tests/aes_sbox_gen.py --synth-inversion  # re-derive the GF(16) circuits
Needs numpy and ortools (pip); --synth-inversion also python-sat.  CP-SAT may return a
different cover of the same size on another run.
"""
import argparse, ast, itertools, random, sys, time
import numpy as np

# ---------------- reference S-box ----------------
def gmul(a, b):
    r = 0
    while b:
        if b & 1:
            r ^= a
        a <<= 1
        if a & 0x100:
            a ^= 0x11B
        b >>= 1
    return r

def ginv(a):
    r = 1
    for _ in range(254):
        r = gmul(r, a)
    return r if a else 0

def affine(s):
    r = 0
    for i in range(8):
        bit = ((s >> i) ^ (s >> ((i + 4) % 8)) ^ (s >> ((i + 5) % 8)) ^ (s >> ((i + 6) % 8)) ^ (s >> ((i + 7) % 8))) & 1
        r |= bit << i
    return r ^ 0x63

SBOX = [affine(ginv(x)) for x in range(256)]
assert SBOX[0] == 0x63 and SBOX[1] == 0x7C and SBOX[0x53] == 0xED

# ---------------- tower arithmetic (normal bases) ----------------
# GF(4): (g1,g0) = g1 W^2 + g0 W ; GF(16): (c1,c0) = c1 Z^4 + c0 Z, Z^2+Z+N ;
# GF(256): (a1,a0) = a1 Y^16 + a0 Y, Y^2+Y+V.
def g4mul(a, b):
    a1, a0, b1, b0 = a >> 1, a & 1, b >> 1, b & 1
    e = (a1 ^ a0) & (b1 ^ b0)
    return (((a1 & b1) ^ e) << 1) | ((a0 & b0) ^ e)

def g4sq(a):
    return ((a & 1) << 1) | (a >> 1)

class Tower:
    def __init__(self, N, V):
        self.N, self.V = N, V

    def m16(self, a, b):
        a1, a0, b1, b0 = a >> 2, a & 3, b >> 2, b & 3
        e = g4mul(g4mul(a1 ^ a0, b1 ^ b0), self.N)
        return ((g4mul(a1, b1) ^ e) << 2) | (g4mul(a0, b0) ^ e)

    def sq16(self, a):
        return self.m16(a, a)

    def inv16(self, d):
        c1, c0 = d >> 2, d & 3
        n = g4mul(c1, c0) ^ g4mul(g4sq(c1 ^ c0), self.N)
        ni = g4sq(n)
        return (g4mul(c0, ni) << 2) | g4mul(c1, ni)

    def m256(self, a, b):
        a1, a0, b1, b0 = a >> 4, a & 15, b >> 4, b & 15
        e = self.m16(self.m16(a1 ^ a0, b1 ^ b0), self.V)
        return ((self.m16(a1, b1) ^ e) << 4) | (self.m16(a0, b0) ^ e)

    def inv256(self, x):
        a1, a0 = x >> 4, x & 15
        n = self.m16(a1, a0) ^ self.m16(self.sq16(a1 ^ a0), self.V)
        ni = self.inv16(n)
        return (self.m16(a0, ni) << 4) | self.m16(a1, ni)

ONE16, ONE256 = 0xF, 0xFF

def valid_tower(T):
    for x in range(1, 16):
        if T.m16(x, T.inv16(x)) != ONE16:
            return False
    for x in range(1, 256):
        if T.m256(x, T.inv256(x)) != ONE256:
            return False
    return True

def iso_roots(T):
    roots = []
    for b in range(256):
        p = [ONE256]
        for i in range(8):
            p.append(T.m256(p[-1], b))
        v = p[8] ^ p[4] ^ p[3] ^ p[1] ^ p[0]
        if v == 0:
            roots.append(p[:8])
    return roots

def lin_apply(cols, x):
    r = 0
    for i in range(8):
        if (x >> i) & 1:
            r ^= cols[i]
    return r

# ---------------- linear-layer optimiser (XOR2/XOR3) ----------------
def popcount_array(n):
    a = np.zeros(1 << n, dtype=np.int16)
    for i in range(n):
        a[1 << i:1 << (i + 1)] = a[:1 << i] + 1
    return a

def opt_linear(nbits, base, targets, allow3=True, rng=None, max_nodes=None):
    """base: list of masks already available; targets: masks needed.
    Returns list of (new_mask, [operand masks]) in order."""
    size = 1 << nbits
    idx = np.arange(size, dtype=np.int64)
    # m[v] = min number of base elements XORing to v
    m = np.full(size, 99, dtype=np.int16)
    m[0] = 0
    for b in base:
        m = np.minimum(m, m[idx ^ b] + 1)
    # repeat relaxation until stable (each pass adds one more use of each base element)
    prev = None
    while prev is None or not np.array_equal(prev, m):
        prev = m.copy()
        for b in base:
            m = np.minimum(m, m[idx ^ b] + 1)
    base = list(base)
    bset = set(base)
    todo = [t for t in dict.fromkeys(targets) if t not in bset and t != 0]
    prog = []

    def find_rep(t):
        for i, j in itertools.combinations(range(len(base)), 2):
            if base[i] ^ base[j] == t:
                return [base[i], base[j]]
        if allow3:
            for i, j, k in itertools.combinations(range(len(base)), 3):
                if base[i] ^ base[j] ^ base[k] == t:
                    return [base[i], base[j], base[k]]
        return None

    def add(s, ops):
        nonlocal m
        prog.append((s, ops))
        base.append(s)
        bset.add(s)
        m = np.minimum(m, m[idx ^ s] + 1)

    while todo:
        # direct hits
        hit = False
        for t in list(todo):
            rep = find_rep(t)
            if rep is not None:
                add(t, rep)
                todo.remove(t)
                hit = True
        if hit or not todo:
            continue
        B = np.array(base, dtype=np.int64)
        nb = len(B)
        I, J = np.triu_indices(nb, 1)
        cand = [B[I] ^ B[J]]
        reps = [np.stack([I, J, np.full_like(I, -1)], 1)]
        if allow3:
            tri = np.array(list(itertools.combinations(range(nb), 3)), dtype=np.int64)
            cand.append(B[tri[:, 0]] ^ B[tri[:, 1]] ^ B[tri[:, 2]])
            reps.append(tri)
        C = np.concatenate(cand)
        R = np.concatenate(reps)
        keep = (C != 0) & ~np.isin(C, B)
        C, R = C[keep], R[keep]
        T = np.array(todo, dtype=np.int64)
        mt = np.minimum(m[T][None, :], m[T[None, :] ^ C[:, None]] + 1).astype(np.int32)
        if allow3:
            d = (mt) // 2  # ops to reach: m=2,3 ->1 ; 4,5 ->2 (m=1 impossible here)
        else:
            d = mt - 1
        score = d.sum(1)
        norm = (mt * mt).sum(1)
        best = score.min()
        sel = np.nonzero(score == best)[0]
        bn = norm[sel].max()
        sel = sel[norm[sel] == bn]
        pick = sel[rng.randrange(len(sel))] if rng else sel[0]
        r = R[pick]
        ops = [int(B[r[0]]), int(B[r[1]])] + ([int(B[r[2]])] if r[2] >= 0 else [])
        add(int(C[pick]), ops)
    return prog

# ---------------- circuit construction ----------------
INVCIRC = None

class Circuit:
    def __init__(self):
        self.sig = []  # (kind, operands) kinds: IN, XOR, AND
        self.expr = []  # for XOR layers we track masks per layer

    def new(self, kind, ops):
        self.sig.append((kind, ops))
        return len(self.sig) - 1

def build(T, cols, rng, allow3=True):
    """cols[i] = tower image of AES basis x^i. Returns circuit + outputs."""
    N = T.N
    C = Circuit()
    U = [C.new('IN', [i]) for i in range(8)]
    # tower bit t of phi(x) as input mask
    tb = [sum((((cols[i] >> t) & 1) << i) for i in range(8)) for t in range(8)]

    def forms16(h1, h0, l1, l0):
        return [h1, h0, h1 ^ h0, l1, l0, l1 ^ l0, h1 ^ l1, h0 ^ l0, h1 ^ h0 ^ l1 ^ l0]

    # a1 = tower bits 7..4 -> (h1,h0,l1,l0) = bits 7,6,5,4 ; a0 = bits 3..0
    Fa1 = forms16(tb[7], tb[6], tb[5], tb[4])
    Fa0 = forms16(tb[3], tb[2], tb[1], tb[0])
    # linear part of norm: sq16(a1^a0)*V, as 4 input masks
    def lin16(f, vec4masks):
        # f linear GF(2)-map on 4-bit values; vec4masks[k] = mask of bit k
        out = [0] * 4
        for k in range(4):
            img = f(1 << k)
            for o in range(4):
                if (img >> o) & 1:
                    out[o] ^= vec4masks[k]
        return out
    s = [tb[k] ^ tb[k + 4] for k in range(4)]
    linN = lin16(lambda v: T.m16(T.sq16(v), T.V), s)
    # ---- top layer
    top_targets = Fa1 + Fa0 + linN
    prog = opt_linear(8, [1 << i for i in range(8)], top_targets, allow3, rng)
    topsig = {1 << i: U[i] for i in range(8)}
    for mask, ops in prog:
        topsig[mask] = C.new('XOR', [topsig[o] for o in ops])
    ntop = len(prog)

    # ---- stage 1: 9 products a1*a0 in GF(16)
    def mul16_products(FA, FB, sigA, sigB):
        """returns list of 9 AND signal ids and a function mapping to 4 result bits as masks over the 9."""
        P = [C.new('AND', [sigA[FA[i]], sigB[FB[i]]]) for i in range(9)]
        return P

    # symbolic: result bits of gf16 mult in terms of the 9 products (index order as forms16)
    def mul16_result_masks():
        # product index: gf4 pair k (0: hi*hi, 1: lo*lo, 2: sum*sum), inner j (0: x1y1, 1: x0y0, 2: xs*ys)
        # forms16 order: [h1,h0,h1^h0, l1,l0,l1^l0, s1,s0,s1^s0] -> pair k = i//3, inner j = i%3
        def g4res(k):  # 2 bits (hi, lo) masks
            p1, p0, px = 1 << (3 * k), 1 << (3 * k + 1), 1 << (3 * k + 2)
            return (p1 ^ px, p0 ^ px)
        hh, ll, ss = g4res(0), g4res(1), g4res(2)
        # e = N * ss  (gf4 const mult, linear)
        def g4const(c, v):  # v = (hi mask, lo mask)
            out_hi = out_lo = 0
            for bit, msk in ((1, v[0]), (0, v[1])):
                img = g4mul(1 << bit, c)
                if img & 2:
                    out_hi ^= msk
                if img & 1:
                    out_lo ^= msk
            return (out_hi, out_lo)
        e = g4const(N, ss)
        hi = (hh[0] ^ e[0], hh[1] ^ e[1])
        lo = (ll[0] ^ e[0], ll[1] ^ e[1])
        return [lo[1], lo[0], hi[1], hi[0]]  # bit0..bit3

    R16 = mul16_result_masks()
    P1 = [C.new('AND', [topsig[Fa1[i]], topsig[Fa0[i]]]) for i in range(9)]
    # norm bits: atoms = 9 products (bits 0..8) + 4 linN signals (bits 9..12)
    atoms1 = P1 + [topsig[linN[k]] for k in range(4)]
    tgt1 = [R16[k] | (1 << (9 + k)) for k in range(4)]
    prog1 = opt_linear(13, [1 << i for i in range(13)], tgt1, allow3, rng)
    s1 = {1 << i: atoms1[i] for i in range(13)}
    for mask, ops in prog1:
        s1[mask] = C.new('XOR', [s1[o] for o in ops])
    nsig = [s1[t] for t in tgt1]  # norm bit 0..3
    nx1 = len(prog1)

    # ---- GF(16) inversion of norm, producing the 9 forms of its inverse
    if INVCIRC is not None:
        gates, iouts = INVCIRC
        sigmap = {i: nsig[i] for i in range(4)}
        for gidx, tr, L in gates:
            sigmap[gidx] = C.new('LUT', [sigmap[tr[0]], sigmap[tr[1]], sigmap[tr[2]], L])
        ib = [sigmap[o] for o in iouts]  # inverse bits 0..3 (+ xor of all)
        def X(a, b):
            return C.new('XOR', [a, b])
        xall = ib[4] if len(ib) > 4 else X(X(ib[0], ib[1]), X(ib[2], ib[3]))
        formsig = [ib[3], ib[2], X(ib[3], ib[2]), ib[1], ib[0], X(ib[1], ib[0]), X(ib[3], ib[1]), X(ib[2], ib[0]), xall]
        prog2a = prog3 = prog4 = []
        S4 = None
    else:
        # inner: c1 = bits 3,2 ; c0 = bits 1,0 ; atoms n0..n3
        # gf4 mult c1*c0: ANDs n3&n1, n2&n0, (n3^n2)&(n1^n0)
        nb = 4
        A2 = {1 << i: nsig[i] for i in range(4)}
        prog2a = opt_linear(4, [1 << i for i in range(4)], [0b1100, 0b0011], allow3, rng)
        for mask, ops in prog2a:
            A2[mask] = C.new('XOR', [A2[o] for o in ops])
        q1 = C.new('AND', [A2[0b1000], A2[0b0010]])
        q0 = C.new('AND', [A2[0b0100], A2[0b0001]])
        qx = C.new('AND', [A2[0b1100], A2[0b0011]])
        # gf4 product c1*c0 = (q1^qx, q0^qx) ; plus N*sq(c1^c0), c1^c0 = (n3^n1, n2^n0)
        # sq swaps: sq(c1^c0) = (n2^n0, n3^n1)
        def g4const_masks(c, v):
            out_hi = out_lo = 0
            for bit, msk in ((1, v[0]), (0, v[1])):
                img = g4mul(1 << bit, c)
                if img & 2:
                    out_hi ^= msk
                if img & 1:
                    out_lo ^= msk
            return (out_hi, out_lo)
        # atoms for this layer: q1,q0,qx (bits 0..2), n0..n3 (bits 3..6)
        nm = lambda k: 1 << (3 + k)
        lin = g4const_masks(N, (nm(2) ^ nm(0), nm(3) ^ nm(1)))
        nn = ((1 | 4) ^ lin[0], (2 | 4) ^ lin[1])  # (hi, lo) of gf4 norm
        # inverse in gf4 = swap
        ni = (nn[1], nn[0])
        atoms3 = [q1, q0, qx] + nsig
        base3 = [1 << i for i in range(7)] + [0]
        # need ni hi, ni lo, ni hi^lo as signals
        prog3 = opt_linear(7, [1 << i for i in range(7)], [ni[0], ni[1], ni[0] ^ ni[1]], allow3, rng)
        S3 = {1 << i: atoms3[i] for i in range(7)}
        for mask, ops in prog3:
            S3[mask] = C.new('XOR', [S3[o] for o in ops])
        nih, nil, nis = S3[ni[0]], S3[ni[1]], S3[ni[0] ^ ni[1]]
        # d^-1 = (c0*ni) Z^4 + (c1*ni) Z ; c0 = (n1,n0) ; c1 = (n3,n2)
        # gf4 mult x*y: ANDs x1y1, x0y0, (x1^x0)(y1^y0)
        r = [C.new('AND', [A2[0b0010], nih]), C.new('AND', [A2[0b0001], nil]), C.new('AND', [A2[0b0011], nis]),
             C.new('AND', [A2[0b1000], nih]), C.new('AND', [A2[0b0100], nil]), C.new('AND', [A2[0b1100], nis])]
        # inv bits: bit3,bit2 = c0*ni = (r0^r2, r1^r2); bit1,bit0 = c1*ni = (r3^r5, r4^r5)
        inv = [0b110000, 0b101000, 0b000101, 0b000011]  # bit0..bit3 masks over r0..r5
        # hmm order: bit0 = lo of c1*ni = r4^r5 ; bit1 = hi = r3^r5 ; bit2 = lo c0*ni = r1^r2 ; bit3 = r0^r2
        inv = [(1 << 4) | (1 << 5), (1 << 3) | (1 << 5), (1 << 1) | (1 << 2), (1 << 0) | (1 << 2)]
        Finv = forms16(inv[3], inv[2], inv[1], inv[0])
        prog4 = opt_linear(6, [1 << i for i in range(6)], Finv, allow3, rng)
        S4 = {1 << i: r[i] for i in range(6)}
        for mask, ops in prog4:
            S4[mask] = C.new('XOR', [S4[o] for o in ops])
        formsig = [S4[Finv[i]] for i in range(9)]
    nx_inv = len(prog2a) + len(prog3) + len(prog4)


    # ---- stage 3: out hi = a0 * inv (bits 7..4), out lo = a1 * inv (bits 3..0)
    PH = [C.new('AND', [topsig[Fa0[i]], formsig[i]]) for i in range(9)]
    PL = [C.new('AND', [topsig[Fa1[i]], formsig[i]]) for i in range(9)]
    # tower result bits as masks over 18 products: bits 0..8 = PL, 9..17 = PH
    tower_bits = R16 + [msk << 9 for msk in R16]  # bit0..3 from PL, bit4..7 from PH
    # AES output bit o = affine( phi^-1 (tower) )
    inv_cols = [0] * 8  # phi^-1: tower bit t -> AES byte
    # build phi matrix and invert
    Mphi = [[(cols[i] >> t) & 1 for i in range(8)] for t in range(8)]  # tower_t = sum_i M[t][i] x_i
    # invert over GF(2)
    A = [row[:] + [1 if j == t else 0 for j in range(8)] for t, row in enumerate(Mphi)]
    for c in range(8):
        p = next(rw for rw in range(c, 8) if A[rw][c])
        A[c], A[p] = A[p], A[c]
        for rw in range(8):
            if rw != c and A[rw][c]:
                A[rw] = [x ^ y for x, y in zip(A[rw], A[c])]
    Minv = [row[8:] for row in A]  # x_i = sum_t Minv[i][t] tower_t
    out_masks = []
    for o in range(8):
        msk = 0
        for k in (0, 4, 5, 6, 7):
            i = (o + k) % 8
            for t in range(8):
                if Minv[i][t]:
                    msk ^= tower_bits[t]
        out_masks.append(msk)
    prog5 = opt_linear(18, [1 << i for i in range(18)], out_masks, allow3, rng)
    S5 = {1 << i: (PL + PH)[i] for i in range(18)}
    for mask, ops in prog5:
        S5[mask] = C.new('XOR', [S5[o] for o in ops])
    outs = [S5[m_] for m_ in out_masks]
    outnot = [(0x63 >> o) & 1 for o in range(8)]
    stats = dict(top=ntop, s1=nx1, inv=nx_inv, bottom=len(prog5),
                 ands=sum(1 for k, _ in C.sig if k == 'AND'),
                 xors=sum(1 for k, _ in C.sig if k == 'XOR'))
    return C, outs, outnot, stats

def simulate(C, outs, outnot):
    full = (1 << 256) - 1
    val = []
    for kind, ops in C.sig:
        if kind == 'IN':
            i = ops[0]
            val.append(sum(((x >> i) & 1) << x for x in range(256)))
        elif kind == 'XOR':
            v = 0
            for o in ops:
                v ^= val[o]
            val.append(v)
        elif kind == 'LUT':
            a, b, c = (val[o] for o in ops[:3])
            r = 0
            for p in range(8):
                if (ops[3] >> p) & 1:
                    r |= (a if p & 4 else ~a & full) & (b if p & 2 else ~b & full) & (c if p & 1 else ~c & full)
            val.append(r)
        else:
            val.append(val[ops[0]] & val[ops[1]])
    res = [0] * 256
    for o in range(8):
        v = val[outs[o]] ^ (full if outnot[o] else 0)
        for x in range(256):
            res[x] |= ((v >> x) & 1) << o
    return res


def to2(C):
    """Return list of nodes: ('IN',i) | ('XOR',a,b) | ('AND',a,b); mapping old id -> new id."""
    nodes = []
    mp = {}
    for i, (kind, ops) in enumerate(C.sig):
        if kind == 'IN':
            nodes.append(('IN', ops[0]))
        elif kind == 'AND':
            nodes.append(('AND', mp[ops[0]], mp[ops[1]]))
        elif kind == 'LUT':
            nodes.append(('LUT', mp[ops[0]], mp[ops[1]], mp[ops[2]], ops[3]))
        else:
            cur = mp[ops[0]]
            for o in ops[1:-1]:
                nodes.append(('XOR', cur, mp[o]))
                cur = len(nodes) - 1
            nodes.append(('XOR', cur, mp[ops[-1]]))
        mp[i] = len(nodes) - 1
    return nodes, mp

def enum_cuts(nodes, K=3):
    cuts = []
    for v, n in enumerate(nodes):
        if n[0] == 'IN':
            cuts.append([frozenset([v])])
            continue
        cs = set()
        if n[0] == 'LUT':
            for ca in cuts[n[1]]:
                for cb in cuts[n[2]]:
                    for cc in cuts[n[3]]:
                        u = ca | cb | cc
                        if len(u) <= K:
                            cs.add(u)
        else:
          a, b = n[1], n[2]
          for ca in cuts[a]:
            for cb in cuts[b]:
                u = ca | cb
                if len(u) <= K:
                    cs.add(u)
        cs = list(cs)
        cuts.append([frozenset([v])] + cs)
    return cuts

def map_lop3(nodes, outputs, time_limit=30.0):
    from ortools.sat.python import cp_model
    cuts = enum_cuts(nodes)
    m = cp_model.CpModel()
    x = {}
    for v, n in enumerate(nodes):
        if n[0] != 'IN':
            x[v] = m.NewBoolVar('x%d' % v)
    y = {}
    for v in x:
        ys = []
        for c in cuts[v][1:]:
            yy = m.NewBoolVar('y%d_%d' % (v, len(ys)))
            y[(v, c)] = yy
            ys.append(yy)
            for l in c:
                if l in x:
                    m.AddImplication(yy, x[l])
        m.Add(sum(ys) == x[v])
    for o in outputs:
        if o in x:
            m.Add(x[o] == 1)
    m.Minimize(sum(x.values()))
    s = cp_model.CpSolver()
    s.parameters.max_time_in_seconds = time_limit
    s.parameters.num_workers = 2
    r = s.Solve(m)
    assert r in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    chosen = {}
    for (v, c), yy in y.items():
        if s.Value(yy):
            chosen[v] = c
    return chosen, r == cp_model.OPTIMAL

def apply(n, vals, full):
    if n[0] == 'XOR':
        return vals[0] ^ vals[1]
    if n[0] == 'AND':
        return vals[0] & vals[1]
    a, b, c = vals
    L = n[4]
    r = 0
    for p in range(8):
        if (L >> p) & 1:
            r |= (a if p & 4 else ~a & full) & (b if p & 2 else ~b & full) & (c if p & 1 else ~c & full)
    return r

def fanins(n):
    return list(n[1:4]) if n[0] == 'LUT' else [n[1], n[2]]

def expr(nodes, v, leaves, name):
    if v in leaves:
        return name(v)
    n = nodes[v]
    op = ' ^ ' if n[0] == 'XOR' else ' & '
    return '(' + expr(nodes, n[1], leaves, name) + op + expr(nodes, n[2], leaves, name) + ')'

def sim_lines(nodes, chosen, outputs, outnot):
    full = (1 << 256) - 1
    val = {}
    for v, n in enumerate(nodes):
        if n[0] == 'IN':
            val[v] = sum((((x >> n[1]) & 1) << x) for x in range(256))
    def ev(v, leaves):
        if v in leaves:
            return val[v]
        n = nodes[v]
        return apply(n, [ev(f, leaves) for f in fanins(n)], full)
    for v in sorted(chosen):
        val[v] = ev(v, chosen[v])
    res = [0] * 256
    for o, v in enumerate(outputs):
        w = val[v] ^ (full if outnot[o] else 0)
        for xx in range(256):
            res[xx] |= ((w >> xx) & 1) << o
    return res

def lut_of(nodes, v, leaves):
    vals = {}
    for l, t in zip(leaves, (0xF0, 0xCC, 0xAA)):
        vals[l] = t
    def ev(x):
        if x in vals:
            return vals[x]
        n = nodes[x]
        return apply(n, [ev(f) for f in fanins(n)], 0xFF)
    return ev(v) & 0xFF

def emit_lop3(nodes, chosen, outputs):
    """Each chosen node -> one lop3<LUT>(a, b, c); outputs s0..s7 WITHOUT the affine constant."""
    def name(v):
        return 'u%d' % nodes[v][1] if nodes[v][0] == 'IN' else 'g%d' % v
    lines = []
    for v in sorted(chosen):
        leaves = sorted(chosen[v])
        lut = lut_of(nodes, v, leaves)
        args = [name(l) for l in leaves]
        while len(args) < 3:
            args.append(args[0])
        lines.append('const uint32_t g%d = lop3<0x%02X>(%s);' % (v, lut, ', '.join(args)))
    for o, v in enumerate(outputs):
        lines.append('s%d = %s;' % (o, name(v)))
    return lines

def synth(nin, targets, k, timeout=None):
    from pysat.solvers import Cadical153
    from pysat.card import CardEnc
    rows = 1 << nin
    cnt = [0]
    def nv():
        cnt[0] += 1
        return cnt[0]
    clauses = []
    val = {}
    for i in range(nin):
        for t in range(rows):
            v = nv(); val[(i, t)] = v
            clauses.append([v] if (t >> i) & 1 else [-v])
    sel = {}
    lut = {}
    for g in range(nin, nin + k):
        for t in range(rows):
            val[(g, t)] = nv()
        lut[g] = [nv() for _ in range(8)]
        triples = list(itertools.combinations(range(g), 3)) if g >= 3 else []
        sv = []
        for tr in triples:
            s = nv(); sel[(g, tr)] = s; sv.append(s)
            for t in range(rows):
                for pat in range(8):
                    a, b, c = (pat >> 2) & 1, (pat >> 1) & 1, pat & 1
                    lits = [-s]
                    for (j, bit) in zip(tr, (a, b, c)):
                        lits.append(-val[(j, t)] if bit else val[(j, t)])
                    clauses.append(lits + [-val[(g, t)], lut[g][pat]])
                    clauses.append(lits + [val[(g, t)], -lut[g][pat]])
        clauses.append(sv)
        enc = CardEnc.atmost(sv, 1, top_id=cnt[0]); cnt[0] = max(cnt[0], enc.nv); clauses += enc.clauses
    # outputs
    outsel = []
    for m, tgt in enumerate(targets):
        ov = []
        for g in range(nin, nin + k):
            o = nv(); ov.append((g, o))
            for t in range(rows):
                clauses.append([-o, val[(g, t)] if (tgt >> t) & 1 else -val[(g, t)]])
        clauses.append([o for _, o in ov])
        outsel.append(ov)
    # symmetry breaking: every gate is used (by a later gate or an output)
    s = Cadical153(bootstrap_with=clauses)
    ok = s.solve()
    if not ok:
        return None
    model = set(l for l in s.get_model() if l > 0)
    gates = []
    for g in range(nin, nin + k):
        tr = next(tr for (gg, tr), v in sel.items() if gg == g and v in model)
        L = sum((1 << p) for p in range(8) if lut[g][p] in model)
        # LUT convention: pattern p = (a<<2)|(b<<1)|c  -> same as PTX lop3 bit index
        gates.append((g, tr, L))
    outs = [next(g for g, o in ov if o in model) for ov in outsel]
    return gates, outs

def check(nin, gates, outs, targets):
    rows = 1 << nin
    vals = {}
    for i in range(nin):
        vals[i] = sum(((t >> i) & 1) << t for t in range(rows))
    full = (1 << rows) - 1
    for g, tr, L in gates:
        a, b, c = (vals[j] for j in tr)
        r = 0
        for p in range(8):
            if (L >> p) & 1:
                r |= (a if p & 4 else ~a & full) & (b if p & 2 else ~b & full) & (c if p & 1 else ~c & full)
        vals[g] = r
    return all(vals[o] == t for o, t in zip(outs, targets))


# SAT-derived 7-gate GF(16) inversion circuits for N = W (1) and N = W^2 (2): gates are
# (id, (operand ids), LUT) with inputs 0..3 = norm bits 0..3; outputs = inverse bits 0..3.
INV = {1: ([(4, (0, 1, 2), 147), (5, (2, 3, 4), 216), (6, (0, 3, 4), 158), (7, (1, 2, 3), 41),
            (8, (4, 6, 7), 90), (9, (1, 3, 6), 149), (10, (0, 1, 6), 228)], [8, 5, 9, 10]),
       2: ([(4, (0, 2, 3), 89), (5, (0, 1, 3), 180), (6, (0, 1, 4), 120), (7, (1, 2, 5), 105),
            (8, (2, 3, 7), 212), (9, (2, 4, 7), 146), (10, (0, 1, 7), 212)], [8, 9, 10, 6])}

DEFAULT = dict(N=2, V=2, cols=[255, 9, 89, 226, 232, 50, 202, 52], seed=1, xor3=0)


def inv_targets(N):
    T = Tower(N, 1 if N == 1 else 2)
    inv = [T.inv16(n) for n in range(16)]
    return [sum((((inv[n] >> k) & 1) << n) for n in range(16)) for k in range(4)]


def make(N, V, cols, seed, xor3, tl):
    global INVCIRC
    INVCIRC = INV[N]
    C, o, n, st = build(Tower(N, V), cols, random.Random(seed * 7919 + 1), allow3=bool(xor3))
    assert simulate(C, o, n) == SBOX
    nodes, mp = to2(C)
    o2 = [mp[x] for x in o]
    chosen, opt = map_lop3(nodes, o2, tl)
    assert sim_lines(nodes, chosen, o2, n) == SBOX, 'mapped circuit wrong'
    return nodes, chosen, o2, opt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tower', nargs=3, metavar=('N', 'V', 'COLS'))
    ap.add_argument('--seed', type=int, default=DEFAULT['seed'])
    ap.add_argument('--xor3', type=int, default=DEFAULT['xor3'])
    ap.add_argument('--time', type=float, default=60.0, help='CP-SAT time limit per cover')
    ap.add_argument('--search', type=float, default=0.0, help='random search for this many seconds')
    ap.add_argument('--synth-inversion', action='store_true')
    a = ap.parse_args()
    for N in (1, 2):  # the embedded inversion circuits are re-checked every run
        gates, outs = INV[N]
        assert check(4, gates, outs, inv_targets(N)), 'GF(16) inversion circuit wrong'
    if a.synth_inversion:
        for N in (1, 2):
            for k in range(5, 8):
                r = synth(4, inv_targets(N), k)
                print('// N=%d: %d gates %s' % (N, k, 'SAT ' + str(r) if r else 'UNSAT'))
                if r:
                    break
        return
    if a.search > 0:
        combos = [(N, V, c) for N in (1, 2) for V in range(16) if valid_tower(Tower(N, V))
                  for c in iso_roots(Tower(N, V))]
        rs, t0, best = random.Random(1), time.time(), None
        while time.time() - t0 < a.search:
            N, V, c = rs.choice(combos)
            seed, x3 = rs.randrange(1000), int(rs.random() < 0.3)
            nodes, chosen, o2, opt = make(N, V, c, seed, x3, 4.0)
            if best is None or len(chosen) < best[0]:
                best = (len(chosen), N, V, c, seed, x3)
                print('// best so far: %d LOP3: --tower %d %d "%s" --seed %d --xor3 %d' % best, flush=True)
        return
    if a.tower:
        N, V, cols = int(a.tower[0]), int(a.tower[1]), ast.literal_eval(a.tower[2])
    else:
        N, V, cols = DEFAULT['N'], DEFAULT['V'], DEFAULT['cols']
    nodes, chosen, o2, opt = make(N, V, cols, a.seed, a.xor3, a.time)
    print('// %d LOP3 (cover optimal: %s); tower N=%d V=%d basis images %s; seed %d; xor3 %d; '
          'checked on all 256 inputs' % (len(chosen), opt, N, V, cols, a.seed, a.xor3))
    print('\n'.join(emit_lop3(nodes, chosen, o2)))


if __name__ == '__main__':
    main()
