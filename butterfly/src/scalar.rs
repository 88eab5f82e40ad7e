//! The scalar path: one element at a time (and the AVX-512 path's tails).

use super::{EPSILON, MODULUS};

/// a·b mod p, fully reduced, for a, b < p.
#[inline(always)]
pub(crate) fn mul(a: u64, b: u64) -> u64 {
    let prod = a as u128 * b as u128;
    reduce128(prod as u64, (prod >> 64) as u64)
}

/// lo + 2^64·hi mod p, fully reduced, for hi·2^64 + lo < p² (a product of two
/// elements): 2^64 ≡ ε and 2^96 ≡ −1, so with hi = h1·2^32 + h0 the value is
/// lo − h1 + h0·ε.
#[inline(always)]
fn reduce128(lo: u64, hi: u64) -> u64 {
    let (h1, h0) = (hi >> 32, hi & EPSILON);
    // lo − h1; a borrow wrapped 2^64 ≡ ε too many in: take ε off (t0 ≥ 2^64 − 2^32 then).
    let (mut t0, borrow) = lo.overflowing_sub(h1);
    if borrow {
        t0 -= EPSILON;
    }
    // h0·ε < 2^64 (h0 < 2^32); a carry wrapped 2^64 ≡ ε out: put ε back (t < h0·ε then).
    let t1 = (h0 << 32) - h0;
    reduce_sum(t0.overflowing_add(t1))
}

/// a + b mod p for a, b < p.
#[inline(always)]
pub(crate) fn add(a: u64, b: u64) -> u64 {
    reduce_sum(a.overflowing_add(b))
}

/// A sum given as (wrapped sum, carry) reduced into 0..p: a carry wrapped 2^64 ≡ ε
/// out, so ε goes back in, then p comes off once if the result is still ≥ p. Exact for
/// its two callers: a + b with a, b < p, and the reduction's t0 + h0·ε (with a carry
/// the wrapped sum is below h0·ε < 2^64 − 2^33 there).
#[inline(always)]
fn reduce_sum((s, carry): (u64, bool)) -> u64 {
    let s = if carry { s + EPSILON } else { s };
    if s >= MODULUS {
        s - MODULUS
    } else {
        s
    }
}

/// a − b mod p for a, b < p.
#[inline(always)]
pub(crate) fn sub(a: u64, b: u64) -> u64 {
    let (d, borrow) = a.overflowing_sub(b);
    // With a borrow, d = a − b + 2^64 and a − b + p = d − ε (d > ε then).
    if borrow {
        d - EPSILON
    } else {
        d
    }
}

pub(crate) fn butterflies(x: &mut [u64], y: &mut [u64], c: u64) {
    for (a, b) in x.iter_mut().zip(y.iter_mut()) {
        let t = mul(*b, c);
        *b = sub(*a, t);
        *a = add(*a, t);
    }
}

pub(crate) fn add_sub(x: &mut [u64], y: &mut [u64]) {
    for (a, b) in x.iter_mut().zip(y.iter_mut()) {
        let t = *b;
        *b = sub(*a, t);
        *a = add(*a, t);
    }
}

pub(crate) fn scale(x: &mut [u64], c: u64) {
    for a in x.iter_mut() {
        *a = mul(*a, c);
    }
}
