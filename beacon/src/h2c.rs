//! Hashing to BN254 G1 as drand's `bls-bn254-unchained-on-g1` scheme does it: RFC 9380 §5.2 `hash_to_field`
//! with `expand_message_xmd` (§5.3.1) over keccak256, the Shallue–van de Woestijne map (§6.6.1, Z = 1), and
//! the random-oracle construction `hash_to_curve = map(u0) + map(u1)` (§3; the G1 cofactor of BN254 is 1).
//!
//! Sources: RFC 9380; drand `crypto/schemes.go` (`NewPedersenBLSBN254UnchainedOnG1Scheme`, DST
//! `BLS_SIG_BN254G1_XMD:KECCAK-256_SVDW_RO_NUL_`); the Solidity reference kevincharm/bls-bn254
//! `contracts/BLS.sol` (MIT), whose constants `C1..C4` the tests compare with ours.
//! `contracts/src/beacon/BN254.sol` computes the same function on chain.

use std::sync::OnceLock;

use alloy_primitives::keccak256;
use ark_bn254::{Fq, G1Affine, G1Projective};
use ark_ec::{AffineRepr, CurveGroup};
use ark_ff::{AdditiveGroup, BigInteger, Field, PrimeField};

use crate::BeaconError;

/// keccak256's input block size in bytes (`s_in_bytes` of RFC 9380 §5.3.1): 1088-bit rate.
const KECCAK_BLOCK: usize = 136;
/// keccak256's output size in bytes (`b_in_bytes`).
const KECCAK_OUT: usize = 32;
/// Bytes per field element in `hash_to_field` (RFC 9380 §5.1: `L = ceil((ceil(log2 p) + k) / 8)` with
/// `log2 p = 254`, security parameter `k = 128`).
pub const L: usize = 48;

/// `expand_message_xmd(msg, DST, len_in_bytes)` of RFC 9380 §5.3.1 with `H = keccak256`.
///
/// Errors: [`BeaconError::ExpandMessage`] if `dst` is longer than 255 bytes, `len_in_bytes` is 0 or more than
/// 65535, or needs more than 255 hash blocks.
pub fn expand_message_xmd_keccak256(
    msg: &[u8],
    dst: &[u8],
    len_in_bytes: usize,
) -> Result<Vec<u8>, BeaconError> {
    let ell = len_in_bytes.div_ceil(KECCAK_OUT);
    if dst.len() > 255 || len_in_bytes == 0 || len_in_bytes > 65535 || ell > 255 {
        return Err(BeaconError::ExpandMessage);
    }
    // DST_prime = DST || I2OSP(len(DST), 1); the length checks above make both casts exact.
    let mut dst_prime = dst.to_vec();
    dst_prime.push(dst.len() as u8);
    // msg_prime = Z_pad || msg || l_i_b_str || I2OSP(0, 1) || DST_prime
    let mut msg_prime = vec![0u8; KECCAK_BLOCK];
    msg_prime.extend_from_slice(msg);
    msg_prime.extend_from_slice(&(len_in_bytes as u16).to_be_bytes());
    msg_prime.push(0);
    msg_prime.extend_from_slice(&dst_prime);
    let b0 = keccak256(&msg_prime);

    let mut out = Vec::with_capacity(ell * KECCAK_OUT);
    let mut prev = [0u8; KECCAK_OUT];
    for i in 1..=ell {
        // b_1 = H(b_0 || 1 || DST_prime); b_i = H(strxor(b_0, b_(i-1)) || i || DST_prime)
        let mut input = Vec::with_capacity(KECCAK_OUT + 1 + dst_prime.len());
        if i == 1 {
            input.extend_from_slice(b0.as_slice());
        } else {
            input.extend(b0.iter().zip(prev.iter()).map(|(a, b)| a ^ b));
        }
        input.push(i as u8);
        input.extend_from_slice(&dst_prime);
        prev = keccak256(&input).0;
        out.extend_from_slice(&prev);
    }
    out.truncate(len_in_bytes);
    Ok(out)
}

/// `hash_to_field(msg, 2)` of RFC 9380 §5.2 over the BN254 base field: two elements, each `OS2IP` of 48
/// uniform bytes reduced mod p.
pub fn hash_to_field(msg: &[u8], dst: &[u8]) -> Result<[Fq; 2], BeaconError> {
    let bytes = expand_message_xmd_keccak256(msg, dst, 2 * L)?;
    Ok([
        Fq::from_be_bytes_mod_order(&bytes[..L]),
        Fq::from_be_bytes_mod_order(&bytes[L..]),
    ])
}

/// The constants of the SVDW map for `y^2 = x^3 + 3` with `Z = 1` (RFC 9380 §6.6.1, "Constants").
struct SvdwConstants {
    /// `g(Z) = 4`.
    c1: Fq,
    /// `-Z / 2`.
    c2: Fq,
    /// `sqrt(-g(Z) * (3 Z^2 + 4 A)) = sqrt(-12)`, the root with `sgn0 = 0`.
    c3: Fq,
    /// `-4 g(Z) / (3 Z^2 + 4 A) = -16 / 3`.
    c4: Fq,
}

fn svdw() -> &'static SvdwConstants {
    static C: OnceLock<SvdwConstants> = OnceLock::new();
    C.get_or_init(|| {
        let z = Fq::ONE;
        let c1 = g(z);
        // 2 and 3 are non-zero in Fq, so the inverses exist; unwrap_or(ZERO) never takes the fallback.
        let c2 = -z * Fq::from(2u64).inverse().unwrap_or(Fq::ZERO);
        let twelve = Fq::from(12u64);
        // -12 is a square in BN254's Fq (p = 1 mod 3); RFC 9380 requires that for Z to be valid.
        let mut c3 = (-twelve).sqrt().unwrap_or(Fq::ZERO);
        if sgn0(&c3) {
            c3 = -c3;
        }
        let c4 = -Fq::from(16u64) * Fq::from(3u64).inverse().unwrap_or(Fq::ZERO);
        SvdwConstants { c1, c2, c3, c4 }
    })
}

/// `g(x) = x^3 + 3`, the right side of BN254's curve equation.
fn g(x: Fq) -> Fq {
    x * x * x + Fq::from(3u64)
}

/// `sgn0(x)` for a prime field (RFC 9380 §4.1): the parity of the canonical integer.
pub(crate) fn sgn0(x: &Fq) -> bool {
    x.into_bigint().is_odd()
}

/// The SVDW map `map_to_curve_svdw(u)` of RFC 9380 §6.6.1 (and its straight-line version F.1): a point on
/// BN254 G1 for any field element `u`. Deterministic; the choice among `x1, x2, x3` and the sign of `y` follow
/// the RFC exactly, so every implementation gives the same point.
pub fn map_to_curve_svdw(u: Fq) -> G1Affine {
    let c = svdw();
    let tv1 = u * u * c.c1;
    let tv2 = Fq::ONE + tv1;
    let tv1 = Fq::ONE - tv1;
    // inv0: 0 maps to 0 (RFC 9380 §4).
    let tv3 = (tv1 * tv2).inverse().unwrap_or(Fq::ZERO);
    let tv4 = u * tv1 * tv3 * c.c3;
    let x1 = c.c2 - tv4;
    let x2 = c.c2 + tv4;
    let tv5 = tv2 * tv2 * tv3;
    let x3 = tv5 * tv5 * c.c4 + Fq::ONE;
    // The RFC proves one of g(x1), g(x2), g(x3) is a square; x1 has priority, then x2.
    let (x, y) = [x1, x2, x3]
        .into_iter()
        .find_map(|x| g(x).sqrt().map(|y| (x, y)))
        .unwrap_or((x3, Fq::ZERO));
    let y = if sgn0(&u) == sgn0(&y) { y } else { -y };
    G1Affine::new_unchecked(x, y)
}

/// `hash_to_curve(msg)` of RFC 9380 §3 (random-oracle encoding) into BN254 G1 with H = keccak256 and the SVDW
/// map: `map(u0) + map(u1)` where `(u0, u1) = hash_to_field(msg, 2)`. No cofactor clearing (G1 has cofactor 1).
pub fn hash_to_g1(msg: &[u8], dst: &[u8]) -> Result<G1Affine, BeaconError> {
    let [u0, u1] = hash_to_field(msg, dst)?;
    let q: G1Projective = map_to_curve_svdw(u0).into_group() + map_to_curve_svdw(u1);
    Ok(q.into_affine())
}

/// Which SVDW candidate (0 = x1, 1 = x2, 2 = x3) `map_to_curve_svdw(u)` takes; for coverage tests.
#[cfg(test)]
pub(crate) fn svdw_branch(u: Fq) -> usize {
    let p = map_to_curve_svdw(u);
    let c = svdw();
    let tv1 = u * u * c.c1;
    let tv3 = ((Fq::ONE - tv1) * (Fq::ONE + tv1))
        .inverse()
        .unwrap_or(Fq::ZERO);
    let tv4 = u * (Fq::ONE - tv1) * tv3 * c.c3;
    if p.x == c.c2 - tv4 {
        0
    } else if p.x == c.c2 + tv4 {
        1
    } else {
        2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The local fixture's rounds (checked on chain by DrandBeaconLocalTest) take all three SVDW branches, so the
    /// Rust/EVM comparison covers the whole map.
    #[test]
    fn local_fixture_rounds_cover_all_branches() {
        let mut seen = [0usize; 3];
        for r in crate::LocalFixture::rounds() {
            let [u0, u1] =
                hash_to_field(&crate::round_message(r), crate::DST).unwrap_or([Fq::ZERO; 2]);
            seen[svdw_branch(u0)] += 1;
            seen[svdw_branch(u1)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 0), "branches taken: {seen:?}");
    }

    fn fq_hex(s: &str) -> Fq {
        let b = hex::decode(format!("{s:0>64}")).expect("hex constant");
        Fq::from_be_bytes_mod_order(&b)
    }

    /// Our SVDW constants equal those in kevincharm/bls-bn254 `contracts/BLS.sol` (an independent derivation).
    #[test]
    fn svdw_constants_match_reference() {
        let c = svdw();
        assert_eq!(c.c1, Fq::from(4u64));
        assert_eq!(
            c.c2,
            fq_hex("183227397098d014dc2822db40c0ac2ecbc0b548b438e5469e10460b6c3e7ea3")
        );
        assert_eq!(
            c.c3,
            fq_hex("16789af3a83522eb353c98fc6b36d713d5d8d1cc5dffffffa")
        );
        assert_eq!(
            c.c4,
            fq_hex("10216f7ba065e00de81ac1e7808072c9dd2b2385cd7b438469602eb24829a9bd")
        );
    }

    /// Every mapped point is on the curve, including the exceptional inputs (u = 0 and 1 - 4u^2 = 0 style cases).
    #[test]
    fn map_lands_on_curve() {
        for u in [
            Fq::ZERO,
            Fq::ONE,
            -Fq::ONE,
            Fq::from(2u64),
            fq_hex("1234567890abcdef"),
        ] {
            let p = map_to_curve_svdw(u);
            assert!(p.is_on_curve(), "u = {u}");
            assert_eq!(sgn0(&u), sgn0(&p.y));
        }
    }

    #[test]
    fn expand_rejects_bad_lengths() {
        assert!(expand_message_xmd_keccak256(b"", &[0u8; 256], 32).is_err());
        assert!(expand_message_xmd_keccak256(b"", b"d", 0).is_err());
        assert!(expand_message_xmd_keccak256(b"", b"d", 255 * 32 + 1).is_err());
        assert_eq!(
            expand_message_xmd_keccak256(b"", b"d", 255 * 32)
                .map(|v| v.len())
                .ok(),
            Some(255 * 32)
        );
    }
}
