//! The prime field: Goldilocks, p = 2^64 − 2^32 + 1.
//!
//! Chosen because its two-adicity is 32 (FFTs up to 2^32 points, so files up to
//! 2^31 blocks), an element fits one 64-bit limb, and 7 data bytes always fit below p.
//! The paper (§4.6) uses p = 3·2^30 + 1; any prime with 2N | p − 1 works.
//! Wire and disk form: the canonical value as 8 bytes little-endian (ENCODING.md §1).

use ark_ff::fields::{Fp64, MontBackend, MontConfig};
use ark_ff::{BigInteger, FftField, Field, PrimeField};

/// ark-ff Montgomery configuration of Goldilocks (generator 7 of the multiplicative group).
#[derive(MontConfig)]
#[modulus = "18446744069414584321"]
#[generator = "7"]
pub struct GoldilocksConfig;

/// A Goldilocks field element.
pub type Fp = Fp64<MontBackend<GoldilocksConfig, 1>>;

/// The modulus p as an integer.
pub const MODULUS: u64 = 0xFFFF_FFFF_0000_0001;

/// Largest supported log2 of an FFT size (the field's two-adicity).
pub const TWO_ADICITY: u32 = 32;

/// Bytes of one element in canonical little-endian form.
pub const ELEMENT_BYTES: usize = 8;

/// A primitive `2^log_n`-th root of unity, for `log_n ≤ 32`.
///
/// Returns `None` past the two-adicity.
pub fn root_of_unity(log_n: u32) -> Option<Fp> {
    if log_n > TWO_ADICITY {
        return None;
    }
    let mut w = Fp::TWO_ADIC_ROOT_OF_UNITY;
    for _ in log_n..TWO_ADICITY {
        w.square_in_place();
    }
    Some(w)
}

/// Canonical 8-byte little-endian encoding of `x`.
#[inline]
pub fn to_bytes(x: Fp) -> [u8; ELEMENT_BYTES] {
    to_u64(x).to_le_bytes()
}

/// The element encoded by 8 little-endian bytes, or `None` if the value is ≥ p
/// (non-canonical: such bytes never come from an honest encoder).
#[inline]
pub fn from_bytes(b: [u8; ELEMENT_BYTES]) -> Option<Fp> {
    let v = u64::from_le_bytes(b);
    if v >= MODULUS {
        return None;
    }
    Some(from_canonical(v))
}

/// ε = 2^64 mod p = 2^32 − 1.
const EPSILON: u64 = 0xFFFF_FFFF;

/// `lo + 2^64·hi mod p` for `hi < 2^32`, fully reduced (in `0..p`): 2^64 ≡ ε.
#[inline(always)]
fn reduce96(lo: u64, hi: u64) -> u64 {
    let (t, carry) = lo.overflowing_add(hi * EPSILON);
    // With a carry, t < hi·ε < 2^64 − ε, so adding ε (the carried 2^64) cannot overflow.
    let t = if carry { t + EPSILON } else { t };
    if t >= MODULUS {
        t - MODULUS
    } else {
        t
    }
}

/// The canonical integer value of `x` (in `0..p`).
#[inline]
pub fn to_u64(x: Fp) -> u64 {
    x.into_bigint().0[0]
}

/// The element of canonical value `v`, for `v < p` (callers check; a larger `v` is
/// reduced mod p, as `Fp::from(v)` does). Montgomery form v·2^64 ≡ v·ε mod p, one
/// 64×32-bit product and a 96-bit reduction instead of ark-ff's Montgomery product by
/// R² (1.0 against 1.6–1.9 ns per element here; every record and run file read
/// crosses it), tested against `Fp::from`. (The other direction, ark-ff's
/// `into_bigint`, is already as fast as a shift-and-reduce: kept.)
#[inline]
pub fn from_canonical(v: u64) -> Fp {
    let prod = v as u128 * EPSILON as u128;
    Fp::new_unchecked(ark_ff::BigInt::new([reduce96(prod as u64, (prod >> 64) as u64)]))
}

/// The word ark-ff holds for `x`: its Montgomery form x·R mod p (R = 2^64), below p.
/// With [`from_montgomery`], the way into and out of the SIMD butterflies
/// (`dpor_butterfly`), which take such words and a canonical twiddle c:
/// (x·R)·c ≡ (x·c)·R, so their plain products are Montgomery forms again.
#[inline(always)]
pub fn to_montgomery(x: Fp) -> u64 {
    x.0 .0[0]
}

/// The element whose Montgomery form ([`to_montgomery`]) is `v`, for `v < p` (as
/// every word of `dpor_butterfly`'s outputs is; a word ≥ p is no element ark-ff
/// makes).
#[inline(always)]
pub fn from_montgomery(v: u64) -> Fp {
    Fp::new_unchecked(ark_ff::BigInt::new([v]))
}

/// `x mod p` for any 128-bit `x`, fully reduced (in `0..p`): 2^64 ≡ ε and 2^96 ≡ −1.
#[inline(always)]
fn reduce128(x: u128) -> u64 {
    let (lo, hi) = (x as u64, (x >> 64) as u64);
    let (hi_hi, hi_lo) = (hi >> 32, hi & EPSILON);
    // lo − hi_hi: a borrow took 2^64 ≡ ε too many (and lo < hi_hi < 2^32 then, so the
    // wrapped value is above ε).
    let (t0, borrow) = lo.overflowing_sub(hi_hi);
    let t0 = if borrow { t0 - EPSILON } else { t0 };
    // + hi_lo·ε (< 2^64); a carry is 2^64 ≡ ε, which then cannot overflow.
    let (t, carry) = t0.overflowing_add(hi_lo * EPSILON);
    let t = if carry { t + EPSILON } else { t };
    if t >= MODULUS {
        t - MODULUS
    } else {
        t
    }
}

/// Σ a[i]·b[i] over the pairs of `a` and `b` (the shorter's length): the products of
/// the Montgomery words summed as 128-bit integers with a count of the carries out,
/// and reduced once at the end (ark-ff reduces after every product). The sum of words
/// is (Σ a·b)·R², so one Montgomery reduction of its residue gives the word of Σ a·b.
/// What a checksum's rows are (σ = M·B, [`crate::checksum`]).
pub fn dot(a: &[Fp], b: &[Fp]) -> Fp {
    let (mut lo, mut carries) = (0u128, 0u64);
    for (x, y) in a.iter().zip(b) {
        let (s, c) = lo.overflowing_add(u128::from(to_montgomery(*x)) * u128::from(to_montgomery(*y)));
        lo = s;
        carries += u64::from(c);
    }
    // carries·2^128 + lo, with 2^128 ≡ −2^32 (mod p).
    let (low, high) = (reduce128(lo), reduce128(u128::from(carries) << 32));
    let residue = if low >= high { low - high } else { low + (MODULUS - high) };
    // The element with word `residue` times the one with word 1: ark-ff's product
    // reduces residue·1 once, to (Σ a·b)·R, the word of Σ a·b.
    from_montgomery(residue) * from_montgomery(1)
}

/// Big-endian 32-byte form of `x`'s canonical value (used by tests against ABI words).
pub fn to_be32(x: Fp) -> [u8; 32] {
    let mut out = [0u8; 32];
    let be = x.into_bigint().to_bytes_be();
    out[32 - be.len()..].copy_from_slice(&be);
    out
}

#[cfg(test)]
mod tests {
    /// [`super::dot`] against the sum of ark-ff's products, on random vectors, on
    /// vectors of p − 1 (a carry out of 128 bits at almost every product), of zero,
    /// and of every length up to 40.
    #[test]
    fn dot_is_the_sum_of_products() {
        use super::{dot, Fp, MODULUS};
        use ark_ff::Zero;
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        let naive = |a: &[Fp], b: &[Fp]| a.iter().zip(b).map(|(x, y)| *x * y).sum::<Fp>();
        for len in (0..40).chain([587, 1000, 5000]) {
            let a: Vec<Fp> = (0..len).map(|_| Fp::from(rng.gen::<u64>())).collect();
            let b: Vec<Fp> = (0..len).map(|_| Fp::from(rng.gen::<u64>())).collect();
            assert_eq!(dot(&a, &b), naive(&a, &b), "random, length {len}");
            let top = vec![Fp::from(MODULUS - 1); len];
            assert_eq!(dot(&top, &top), naive(&top, &top), "p − 1, length {len}");
            assert_eq!(dot(&a, &top), naive(&a, &top), "mixed, length {len}");
            assert_eq!(dot(&a, &vec![Fp::zero(); len]), Fp::zero());
        }
        let a: Vec<Fp> = (0..10).map(|_| Fp::from(rng.gen::<u64>())).collect();
        assert_eq!(dot(&a, &a[..4]), naive(&a[..4], &a[..4]), "the shorter length");
    }

    use super::*;

    #[test]
    fn roots_have_exact_order() {
        for log_n in 0..=TWO_ADICITY {
            let w = root_of_unity(log_n).unwrap();
            let n = 1u64 << log_n;
            assert_eq!(w.pow([n]), Fp::from(1u64), "w^n = 1 for log_n {log_n}");
            if log_n > 0 {
                assert_ne!(w.pow([n / 2]), Fp::from(1u64), "order exactly n for log_n {log_n}");
            }
        }
        assert!(root_of_unity(33).is_none());
    }

    #[test]
    fn bytes_round_trip_and_reject_non_canonical() {
        for v in [0u64, 1, 7, 1 << 56, MODULUS - 1] {
            let x = Fp::from(v);
            assert_eq!(to_u64(x), v);
            assert_eq!(from_bytes(to_bytes(x)), Some(x));
        }
        assert_eq!(from_bytes(MODULUS.to_le_bytes()), None);
        assert_eq!(from_bytes(u64::MAX.to_le_bytes()), None);
        assert_eq!(to_be32(Fp::from(0x0102u64))[30..], [1, 2]);
    }

    /// A plain product of a Montgomery word by a canonical value is the Montgomery
    /// word of the product (what the code's SIMD butterflies rely on).
    #[test]
    fn montgomery_words_multiply_by_canonical_values() {
        for (a, c) in [(3u64, 5u64), (MODULUS - 1, MODULUS - 1), (1 << 40, EPSILON), (123_456_789, 1)] {
            let (x, y) = (Fp::from(a), Fp::from(c));
            assert_eq!(from_montgomery(to_montgomery(x)), x);
            assert!(to_montgomery(x) < MODULUS);
            assert_eq!(from_montgomery(dpor_butterfly::mul(to_montgomery(x), to_u64(y))), x * y);
        }
    }

    /// The fast conversion into Montgomery form against ark-ff's own (`Fp::from(u64)`),
    /// at the edges of every carry and branch and at random values.
    #[test]
    fn fast_conversions_match_ark_ff() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0x601d);
        let mut values: Vec<u64> = vec![0, 1, 2, EPSILON - 1, EPSILON, EPSILON + 1, 1 << 32, 1 << 56, 1 << 63, MODULUS - 2, MODULUS - 1];
        for k in 0..64 {
            values.extend([1u64 << k, (1u64 << k).wrapping_sub(1) % MODULUS, MODULUS - (1u64 << k).min(MODULUS - 1)]);
        }
        values.extend((0..200_000).map(|_| rng.gen_range(0..MODULUS)));
        for v in values {
            let ark = Fp::from(v);
            let fast = from_canonical(v);
            assert_eq!(fast, ark, "from_canonical({v})");
            assert_eq!(to_u64(fast), v, "round trip of {v}");
        }
        // Random Montgomery forms (products), not only images of small integers.
        let mut x = Fp::from(7u64);
        for _ in 0..100_000 {
            x = x * x + Fp::from(3u64);
            assert_eq!(from_canonical(to_u64(x)), x);
        }
        // Values ≥ p are reduced, as Fp::from does.
        for v in [MODULUS, MODULUS + 1, u64::MAX] {
            assert_eq!(from_canonical(v), Fp::from(v), "from_canonical({v})");
        }
    }
}
