//! Eight elements at a time in 512-bit registers (AVX-512F): the products from four
//! 32×32→64-bit multiplies (`vpmuludq`), the carries and reductions with unsigned
//! compares into mask registers and masked adds. The tails (fewer than eight
//! elements) take the scalar path.
//!
//! Called only after the CPU's AVX-512F was detected at run time.

use super::{scalar, EPSILON, MODULUS};
use std::arch::x86_64::{
    __m512i, _mm512_add_epi64, _mm512_and_si512, _mm512_cmpge_epu64_mask, _mm512_cmplt_epu64_mask, _mm512_loadu_si512,
    _mm512_mask_add_epi64, _mm512_mask_sub_epi64, _mm512_mul_epu32, _mm512_or_si512, _mm512_set1_epi64, _mm512_slli_epi64,
    _mm512_srli_epi64, _mm512_storeu_si512, _mm512_sub_epi64,
};

/// Elements per register.
const LANES: usize = 8;

/// The broadcast constants of one call.
#[derive(Clone, Copy)]
struct Consts {
    p: __m512i,
    eps: __m512i,
    low32: __m512i,
}

#[target_feature(enable = "avx512f")]
fn consts() -> Consts {
    Consts { p: _mm512_set1_epi64(MODULUS as i64), eps: _mm512_set1_epi64(EPSILON as i64), low32: _mm512_set1_epi64(EPSILON as i64) }
}

/// a·c mod p in each lane, fully reduced, for a, c < p; `c_hi` is c >> 32 in every
/// lane (`vpmuludq` multiplies the low 32 bits of each lane).
#[target_feature(enable = "avx512f")]
fn mul(k: Consts, a: __m512i, c: __m512i, c_hi: __m512i) -> __m512i {
    let a_hi = _mm512_srli_epi64::<32>(a);
    let ll = _mm512_mul_epu32(a, c);
    let lh = _mm512_mul_epu32(a, c_hi);
    let hl = _mm512_mul_epu32(a_hi, c);
    let hh = _mm512_mul_epu32(a_hi, c_hi);
    // 128-bit product: t and u cannot overflow (each adds < 2^32 to a product of two
    // 32-bit values, at most 2^64 − 2^33 + 1).
    let t = _mm512_add_epi64(lh, _mm512_srli_epi64::<32>(ll));
    let u = _mm512_add_epi64(hl, _mm512_and_si512(t, k.low32));
    let lo = _mm512_or_si512(_mm512_slli_epi64::<32>(u), _mm512_and_si512(ll, k.low32));
    let hi = _mm512_add_epi64(_mm512_add_epi64(hh, _mm512_srli_epi64::<32>(t)), _mm512_srli_epi64::<32>(u));
    // lo − h1 + h0·ε, as the scalar `reduce128`.
    let h1 = _mm512_srli_epi64::<32>(hi);
    let h0 = _mm512_and_si512(hi, k.low32);
    let borrow = _mm512_cmplt_epu64_mask(lo, h1);
    let t0 = _mm512_sub_epi64(lo, h1);
    let t0 = _mm512_mask_sub_epi64(t0, borrow, t0, k.eps);
    let t1 = _mm512_sub_epi64(_mm512_slli_epi64::<32>(h0), h0);
    reduce_sum(k, _mm512_add_epi64(t0, t1), t1)
}

/// a + b mod p in each lane, for a, b < p.
#[target_feature(enable = "avx512f")]
fn add(k: Consts, a: __m512i, b: __m512i) -> __m512i {
    reduce_sum(k, _mm512_add_epi64(a, b), a)
}

/// The wrapped sum `s` = x + `addend` (mod 2^64) reduced into 0..p, as the scalar
/// `reduce_sum`: a carry (s < addend) put back as ε, then p taken off once if needed.
#[target_feature(enable = "avx512f")]
fn reduce_sum(k: Consts, s: __m512i, addend: __m512i) -> __m512i {
    let carry = _mm512_cmplt_epu64_mask(s, addend);
    let s = _mm512_mask_add_epi64(s, carry, s, k.eps);
    let over = _mm512_cmpge_epu64_mask(s, k.p);
    _mm512_mask_sub_epi64(s, over, s, k.p)
}

/// a − b mod p in each lane, for a, b < p.
#[target_feature(enable = "avx512f")]
fn sub(k: Consts, a: __m512i, b: __m512i) -> __m512i {
    let borrow = _mm512_cmplt_epu64_mask(a, b);
    let d = _mm512_sub_epi64(a, b);
    _mm512_mask_sub_epi64(d, borrow, d, k.eps)
}

/// [`super::butterflies`]. Safety: the CPU must have AVX-512F; `x.len() == y.len()`.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn butterflies(x: &mut [u64], y: &mut [u64], c: u64) {
    let k = consts();
    let cv = _mm512_set1_epi64(c as i64);
    let c_hi = _mm512_set1_epi64((c >> 32) as i64);
    let mut xs = x.chunks_exact_mut(LANES);
    let mut ys = y.chunks_exact_mut(LANES);
    for (xc, yc) in (&mut xs).zip(&mut ys) {
        // SAFETY: each chunk is 8 u64 = 64 bytes, valid for reads and writes; the
        // loads and stores are unaligned ones.
        unsafe {
            let a = _mm512_loadu_si512(xc.as_ptr().cast());
            let b = _mm512_loadu_si512(yc.as_ptr().cast());
            let t = mul(k, b, cv, c_hi);
            _mm512_storeu_si512(xc.as_mut_ptr().cast(), add(k, a, t));
            _mm512_storeu_si512(yc.as_mut_ptr().cast(), sub(k, a, t));
        }
    }
    scalar::butterflies(xs.into_remainder(), ys.into_remainder(), c);
}

/// [`super::add_sub`]. Safety: the CPU must have AVX-512F; `x.len() == y.len()`.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn add_sub(x: &mut [u64], y: &mut [u64]) {
    let k = consts();
    let mut xs = x.chunks_exact_mut(LANES);
    let mut ys = y.chunks_exact_mut(LANES);
    for (xc, yc) in (&mut xs).zip(&mut ys) {
        // SAFETY: as in `butterflies`.
        unsafe {
            let a = _mm512_loadu_si512(xc.as_ptr().cast());
            let b = _mm512_loadu_si512(yc.as_ptr().cast());
            _mm512_storeu_si512(xc.as_mut_ptr().cast(), add(k, a, b));
            _mm512_storeu_si512(yc.as_mut_ptr().cast(), sub(k, a, b));
        }
    }
    scalar::add_sub(xs.into_remainder(), ys.into_remainder());
}

/// [`super::scale`]. Safety: the CPU must have AVX-512F.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn scale(x: &mut [u64], c: u64) {
    let k = consts();
    let cv = _mm512_set1_epi64(c as i64);
    let c_hi = _mm512_set1_epi64((c >> 32) as i64);
    let mut xs = x.chunks_exact_mut(LANES);
    for xc in &mut xs {
        // SAFETY: as in `butterflies`.
        unsafe {
            let a = _mm512_loadu_si512(xc.as_ptr().cast());
            _mm512_storeu_si512(xc.as_mut_ptr().cast(), mul(k, a, cv, c_hi));
        }
    }
    scalar::scale(xs.into_remainder(), c);
}
