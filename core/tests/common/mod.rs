//! Shared test helpers: a deterministic RNG, random blocks, and the naive references.
#![allow(dead_code, missing_docs, clippy::unwrap_used)]

use ark_ff::Field;
use dpor_core::code::{self, bit_reverse};
use dpor_core::field::{root_of_unity, Fp};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

pub fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

pub fn random_block(rng: &mut impl Rng, bytes: usize) -> Vec<u8> {
    (0..bytes).map(|_| rng.gen()).collect()
}

pub fn random_elements(rng: &mut impl Rng, n: usize) -> Vec<Fp> {
    (0..n).map(|_| Fp::from(rng.gen::<u64>() >> 1)).collect()
}

/// The generator matrix of a run of m = 2^ℓ data blocks, brute force: row p (a
/// position) has entries ω^{e(p)·ψ_ℓ(r)} for data block r (write order), times
/// `y_scale` on Y rows, where e(p) = 2p for X (p < m) and 2(p−m)+1 for Y, ω a
/// primitive 2m-th root of unity. Returns G (2m × m).
pub fn generator_matrix(m: usize, y_scale: Fp) -> Vec<Vec<Fp>> {
    let log_m = m.trailing_zeros();
    let omega = root_of_unity(log_m + 1).unwrap();
    (0..2 * m)
        .map(|p| {
            let (e, scale) = if p < m { (2 * p, Fp::from(1u64)) } else { (2 * (p - m) + 1, y_scale) };
            (0..m)
                .map(|r| scale * omega.pow([(e as u64) * bit_reverse(r as u64, log_m)]))
                .collect()
        })
        .collect()
}

/// G·D with D the m data blocks (flat, width w): the 2m coded blocks, flat.
pub fn matrix_encode(g: &[Vec<Fp>], data: &[Fp], width: usize) -> Vec<Fp> {
    let mut out = vec![Fp::from(0u64); g.len() * width];
    for (p, row) in g.iter().enumerate() {
        for (r, coef) in row.iter().enumerate() {
            for c in 0..width {
                out[p * width + c] += *coef * data[r * width + c];
            }
        }
    }
    out
}

/// Runs HAdd for the 2^level writes of an aligned window starting at t0 in a file of
/// 2^log_n blocks, returning the level built. Within the window, the levels HAdd
/// consumes are those built in it (the trailing ones of t equal those of t − t0).
pub fn hadd_window(data: &[Fp], t0: u64, level: u32, log_n: u32, width: usize) -> Vec<Fp> {
    let mut levels: Vec<Option<Vec<Fp>>> = vec![None; level as usize + 1];
    for r in 0..(1usize << level) {
        let t = t0 + r as u64;
        let target = code::target_level(t) as usize;
        let consumed: Vec<&[Fp]> = levels[..target].iter().map(|l| l.as_deref().unwrap()).collect();
        let run = code::h_add(t, log_n, &data[r * width..(r + 1) * width], &consumed, width).unwrap();
        for l in &mut levels[..target] {
            *l = None;
        }
        levels[target] = Some(run);
    }
    levels[level as usize].take().unwrap()
}
