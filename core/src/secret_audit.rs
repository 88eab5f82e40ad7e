//! The owner's compact secret audit (§5.5 of the paper; docs/SCHEME.md §9).
//!
//! The public audit (`crate::audit`) downloads λ whole coded blocks per run, each with
//! its run path. The owner, who holds the checksum keys, can ask for much less: for
//! each run it draws a fresh 32-byte seed, from which both sides derive λ positions and
//! λ non-zero coefficients r_j ([`challenge`]); the node returns **one** aggregated
//! coded block A = Σ_j r_j·B_{p_j} ([`aggregate`]) and the σ̃ of the sampled positions;
//! the owner opens each σ̃ (or takes σ from its own cache of small levels) and checks
//! σ(A) = Σ_j r_j·σ(B_{p_j}) ([`verify_run`]). σ(B) = M·B is linear, so an honest
//! answer always passes.
//!
//! Why a wrong answer fails: every σ̃ is sealed for its place (run tag, build time,
//! position; [`crate::checksum::Place`]), so the node cannot present a checksum of
//! another block, run or time; with the σ_j fixed, the node passes only with an A
//! such that M·(A − Σ r_j B_{p_j}) = 0 for the true blocks. Without the true blocks
//! it cannot compute Σ r_j B_{p_j}, and any other A differs from it by some Δ ≠ 0
//! chosen without knowing M (secret, uniform; σ only ever leaves the owner sealed),
//! which passes with probability p^-ρ ≈ 2^-128. So a node that cannot produce a
//! fraction f of a run's coded blocks passes a run's check with probability at most
//! (1 − f)^λ + 2^-127, as the public audit (positions are drawn with replacement).
//!
//! Bytes per run: one coded block (8·s) and λ σ̃ of 32 bytes (none for runs whose
//! σ the owner caches), against λ coded blocks with their paths for the public audit.
//!
//! Pure: no I/O. The node computes [`challenge`] and [`aggregate`]; the owner
//! [`challenge`] and [`verify_run`].

use crate::block::{BlockError, BlockFormat};
use crate::checksum::{OwnerKeys, Place, Sealed, RHO};
use crate::field::{Fp, MODULUS};
use crate::state::RunId;
use ark_ff::Zero;
use thiserror::Error;

/// BLAKE3 key-derivation context of the challenge (positions and coefficients).
pub const SECRET_AUDIT_CONTEXT: &str = "dpor 2026-11 secret audit challenge v1";

/// Most samples per run a secret audit may ask (the node refuses more).
pub const MAX_SECRET_LAMBDA: u32 = 4096;

/// Errors of the secret audit's inputs (shapes), as opposed to a failed check
/// ([`SecretFault`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SecretAuditError {
    /// A run size that is not a power of two ≥ 1.
    #[error("run size {0} is not a power of two")]
    Size(u64),
    /// λ is 0 or above [`MAX_SECRET_LAMBDA`].
    #[error("λ = {0} is out of range 1..={MAX_SECRET_LAMBDA}")]
    Lambda(u32),
    /// Blocks and coefficients do not pair up.
    #[error("{blocks} blocks for {coefficients} coefficients")]
    Count {
        /// Blocks given.
        blocks: usize,
        /// Coefficients (samples).
        coefficients: usize,
    },
    /// A sampled block is not a coded block of the format (wrong length, non-canonical
    /// element, or empty because the node could not read it).
    #[error("sampled block {index}: {source}")]
    Block {
        /// Index of the sample.
        index: usize,
        /// Why.
        source: BlockError,
    },
}

/// What one run's secret audit asks: the positions and their coefficients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The run.
    pub run: RunId,
    /// Its size in coded blocks.
    pub size: u64,
    /// Sampled positions (all of the run if it has ≤ λ blocks, else λ with replacement).
    pub positions: Vec<u64>,
    /// One non-zero coefficient per position.
    pub coefficients: Vec<Fp>,
}

/// The challenge for `run` (of `size` coded blocks, a power of two) from the owner's
/// fresh `seed`: positions (all `size` of them if `size ≤ λ`, else λ drawn uniformly
/// with replacement) and uniform non-zero coefficients, all from the BLAKE3 XOF keyed
/// by `derive_key(SECRET_AUDIT_CONTEXT, seed)` over `u32le(tag) ‖ u64le(built_at) ‖
/// u64le(size) ‖ u32le(λ)`. Deterministic: the node derives the same.
///
/// Errors: a size that is not a power of two, λ out of range.
pub fn challenge(seed: &[u8; 32], run: RunId, size: u64, lambda: u32) -> Result<Challenge, SecretAuditError> {
    if size == 0 || !size.is_power_of_two() {
        return Err(SecretAuditError::Size(size));
    }
    if lambda == 0 || lambda > MAX_SECRET_LAMBDA {
        return Err(SecretAuditError::Lambda(lambda));
    }
    let key = blake3::derive_key(SECRET_AUDIT_CONTEXT, seed);
    let mut h = blake3::Hasher::new_keyed(&key);
    h.update(&run.tag.0.to_le_bytes());
    h.update(&run.built_at.to_le_bytes());
    h.update(&size.to_le_bytes());
    h.update(&lambda.to_le_bytes());
    let mut xof = h.finalize_xof();
    let mut word = [0u8; 8];
    let positions: Vec<u64> = if size <= lambda as u64 {
        (0..size).collect()
    } else {
        (0..lambda)
            .map(|_| {
                xof.fill(&mut word);
                u64::from_le_bytes(word) & (size - 1) // size divides 2^64: unbiased
            })
            .collect()
    };
    let mut coefficients = Vec::with_capacity(positions.len());
    while coefficients.len() < positions.len() {
        xof.fill(&mut word);
        let v = u64::from_le_bytes(word);
        if v != 0 && v < MODULUS {
            coefficients.push(Fp::from(v));
        }
    }
    Ok(Challenge { run, size, positions, coefficients })
}

/// The node's answer for one run: A = Σ_j r_j·B_j over the sampled coded blocks'
/// bytes (8·s each, in the challenge's order), as a coded block's elements.
///
/// Errors: a count that does not match the coefficients, or a block that is not a
/// coded block of `format` (the node then has nothing to answer for the run).
pub fn aggregate<B: AsRef<[u8]>>(format: &BlockFormat, coefficients: &[Fp], blocks: &[B]) -> Result<Vec<Fp>, SecretAuditError> {
    if blocks.len() != coefficients.len() {
        return Err(SecretAuditError::Count { blocks: blocks.len(), coefficients: coefficients.len() });
    }
    let mut acc = vec![Fp::zero(); format.width()];
    for (index, (b, r)) in blocks.iter().zip(coefficients).enumerate() {
        let elements = format.coded_from_bytes(b.as_ref()).map_err(|source| SecretAuditError::Block { index, source })?;
        for (a, e) in acc.iter_mut().zip(&elements) {
            *a += *e * r;
        }
    }
    Ok(acc)
}

/// Σ_j r_j·σ_j: the checksum the aggregate of blocks with checksums `sigmas` has.
pub fn combined_checksum(coefficients: &[Fp], sigmas: &[[Fp; RHO]]) -> [Fp; RHO] {
    let mut out = [Fp::zero(); RHO];
    for (r, s) in coefficients.iter().zip(sigmas) {
        for (o, x) in out.iter_mut().zip(s) {
            *o += *x * r;
        }
    }
    out
}

/// Why one run's secret audit failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SecretFault {
    /// The aggregate is not a coded block (empty: the node could not read a sampled
    /// block; or a wrong length or non-canonical element).
    #[error("the aggregate is not a coded block: {0}")]
    Aggregate(BlockError),
    /// The node returned the wrong number of σ̃.
    #[error("{got} encrypted checksums for {expected} samples")]
    SealedCount {
        /// σ̃ returned.
        got: usize,
        /// Samples.
        expected: usize,
    },
    /// No σ̃ for a sampled position (and no cached σ).
    #[error("no encrypted checksum for position {0}")]
    MissingChecksum(u64),
    /// A σ̃ does not open for its place: from another position, run or build, or tampered.
    #[error("the encrypted checksum of position {0} does not open for that place")]
    SealedChecksum(u64),
    /// The owner's cached σ does not cover a sampled position.
    #[error("the cached checksums do not cover position {0}")]
    Cache(u64),
    /// σ(A) ≠ Σ r_j·σ_j: some sampled block is wrong or missing on the node.
    #[error("the aggregated block does not match the combination of the sampled checksums: a sampled coded block is wrong or missing")]
    Mismatch,
}

/// The owner's check of one run's answer: `aggregate` (the node's A, 8·s bytes) against
/// Σ r_j·σ_j, where σ_j is the owner's cached checksum of position p_j (`cached`: the
/// run's size × ρ checksums, flat) if given, else the opening of `sealed[j]` for
/// `Place::Run { tag, built_at, position: p_j }`.
///
/// Errors: the first [`SecretFault`] found.
pub fn verify_run(
    keys: &OwnerKeys,
    format: &BlockFormat,
    challenge: &Challenge,
    aggregate: &[u8],
    sealed: &[Option<Sealed>],
    cached: Option<&[Fp]>,
) -> Result<(), SecretFault> {
    let n = challenge.positions.len();
    let mut sigmas = Vec::with_capacity(n);
    match cached {
        Some(cache) => {
            for &p in &challenge.positions {
                let s = cache.get(p as usize * RHO..(p as usize + 1) * RHO).ok_or(SecretFault::Cache(p))?;
                let mut sigma = [Fp::zero(); RHO];
                sigma.copy_from_slice(s);
                sigmas.push(sigma);
            }
        }
        None => {
            if sealed.len() != n {
                return Err(SecretFault::SealedCount { got: sealed.len(), expected: n });
            }
            for (&p, s) in challenge.positions.iter().zip(sealed) {
                let s = s.as_ref().ok_or(SecretFault::MissingChecksum(p))?;
                let place = Place::Run { tag: challenge.run.tag, built_at: challenge.run.built_at, position: p };
                sigmas.push(keys.open(place, s).map_err(|_| SecretFault::SealedChecksum(p))?);
            }
        }
    }
    let a = format.coded_from_bytes(aggregate).map_err(SecretFault::Aggregate)?;
    let got = keys.checksum(&a).map_err(|_| SecretFault::Aggregate(BlockError::RecordWidth { got: a.len(), expected: format.width() }))?;
    if got == combined_checksum(&challenge.coefficients, &sigmas) {
        Ok(())
    } else {
        Err(SecretFault::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::RunTag;
    use crate::code;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    /// A run built by the real code (C of a small file), its coded blocks' bytes, and
    /// the owner's σ̃ of every position, as the node would hold them.
    struct Fixture {
        keys: OwnerKeys,
        format: BlockFormat,
        run: RunId,
        bytes: Vec<Vec<u8>>,
        sigma: Vec<Fp>,
        sealed: Vec<Sealed>,
    }

    fn fixture(log_blocks: u32, built_at: u64, seed: u64) -> Fixture {
        let format = BlockFormat::new(64).unwrap();
        let keys = OwnerKeys::derive(&[3u8; 32], format.width());
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut records = Vec::new();
        for i in 0..1u64 << log_blocks {
            let b: Vec<u8> = (0..64).map(|_| rng.gen()).collect();
            format.push_record(i, &b, &mut records).unwrap();
        }
        let c = code::c_rebuild(&records, log_blocks, format.width()).unwrap();
        let run = RunId { tag: RunTag::C, built_at };
        let bytes: Vec<Vec<u8>> = c.chunks_exact(format.width()).map(|b| format.coded_to_bytes(b).unwrap()).collect();
        // The owner's σ of C, computed on checksums (linearity), never from the blocks.
        let sigma = code::c_rebuild(&keys.checksums(&records).unwrap(), log_blocks, RHO).unwrap();
        let sealed = (0..bytes.len() as u64)
            .map(|p| {
                let s = [sigma[p as usize * RHO], sigma[p as usize * RHO + 1]];
                keys.seal(Place::Run { tag: run.tag, built_at, position: p }, &s)
            })
            .collect();
        Fixture { keys, format, run, bytes, sigma, sealed }
    }

    /// What an honest node answers: (aggregate bytes, σ̃ of each sample).
    fn answer(f: &Fixture, ch: &Challenge, blocks: &[Vec<u8>]) -> (Vec<u8>, Vec<Option<Sealed>>) {
        let picked: Vec<&Vec<u8>> = ch.positions.iter().map(|&p| &blocks[p as usize]).collect();
        let a = aggregate(&f.format, &ch.coefficients, &picked).unwrap();
        let sealed = ch.positions.iter().map(|&p| Some(f.sealed[p as usize])).collect();
        (f.format.coded_to_bytes(&a).unwrap(), sealed)
    }

    #[test]
    fn an_honest_node_passes_with_sealed_or_cached_checksums() {
        let f = fixture(6, 64, 1);
        for s in 0..8u8 {
            let ch = challenge(&[s; 32], f.run, 128, 16).unwrap();
            assert_eq!(ch.positions.len(), 16);
            let (a, sealed) = answer(&f, &ch, &f.bytes);
            assert_eq!(verify_run(&f.keys, &f.format, &ch, &a, &sealed, None), Ok(()));
            assert_eq!(verify_run(&f.keys, &f.format, &ch, &a, &[], Some(&f.sigma)), Ok(()));
        }
        // A run of ≤ λ blocks is sampled whole.
        let ch = challenge(&[1; 32], f.run, 128, 128).unwrap();
        assert_eq!(ch.positions, (0..128).collect::<Vec<_>>());
        let (a, sealed) = answer(&f, &ch, &f.bytes);
        assert_eq!(verify_run(&f.keys, &f.format, &ch, &a, &sealed, None), Ok(()));
    }

    #[test]
    fn the_challenge_is_deterministic_uniform_enough_and_seed_bound() {
        let run = RunId { tag: RunTag::level(3), built_at: 9 };
        let a = challenge(&[7; 32], run, 1 << 20, 128).unwrap();
        assert_eq!(a, challenge(&[7; 32], run, 1 << 20, 128).unwrap());
        assert_ne!(a.positions, challenge(&[8; 32], run, 1 << 20, 128).unwrap().positions);
        assert_ne!(a.positions, challenge(&[7; 32], RunId { built_at: 10, ..run }, 1 << 20, 128).unwrap().positions);
        assert!(a.positions.iter().all(|&p| p < 1 << 20));
        assert!(a.coefficients.iter().all(|c| !c.is_zero()));
        // Positions spread over the run: both halves hit.
        assert!(a.positions.iter().any(|&p| p < 1 << 19) && a.positions.iter().any(|&p| p >= 1 << 19));
        assert_eq!(challenge(&[0; 32], run, 12, 4), Err(SecretAuditError::Size(12)));
        assert_eq!(challenge(&[0; 32], run, 16, 0), Err(SecretAuditError::Lambda(0)));
        assert_eq!(challenge(&[0; 32], run, 16, MAX_SECRET_LAMBDA + 1), Err(SecretAuditError::Lambda(MAX_SECRET_LAMBDA + 1)));
    }

    #[test]
    fn a_corrupted_or_erased_sampled_block_fails() {
        let f = fixture(6, 64, 2);
        let ch = challenge(&[5; 32], f.run, 128, 16).unwrap();
        let victim = ch.positions[3] as usize;
        // One flipped bit in one sampled block (kept canonical: a low bit of an element).
        let mut bad = f.bytes.clone();
        bad[victim][8] ^= 1;
        let (a, sealed) = answer(&f, &ch, &bad);
        assert_eq!(verify_run(&f.keys, &f.format, &ch, &a, &sealed, None), Err(SecretFault::Mismatch));
        assert_eq!(verify_run(&f.keys, &f.format, &ch, &a, &[], Some(&f.sigma)), Err(SecretFault::Mismatch));
        // The block erased (zeros, what `dpor-node erase` leaves).
        let mut bad = f.bytes.clone();
        bad[victim].fill(0);
        let (a, sealed) = answer(&f, &ch, &bad);
        assert_eq!(verify_run(&f.keys, &f.format, &ch, &a, &sealed, None), Err(SecretFault::Mismatch));
        // A node that cannot read it answers an empty aggregate.
        let (_, sealed) = answer(&f, &ch, &f.bytes);
        assert!(matches!(verify_run(&f.keys, &f.format, &ch, &[], &sealed, None), Err(SecretFault::Aggregate(_))));
        // A node that leaves the bad block out of the combination.
        let mut coeffs = ch.coefficients.clone();
        coeffs[3] = Fp::zero();
        let picked: Vec<&Vec<u8>> = ch.positions.iter().map(|&p| &f.bytes[p as usize]).collect();
        let a = f.format.coded_to_bytes(&aggregate(&f.format, &coeffs, &picked).unwrap()).unwrap();
        assert_eq!(verify_run(&f.keys, &f.format, &ch, &a, &sealed, None), Err(SecretFault::Mismatch));
    }

    /// A correct-looking aggregate of wrong blocks: the node combines, with the right
    /// coefficients, blocks it does hold instead of the sampled ones, and sends their
    /// genuine σ̃ (or the sampled positions' σ̃). Each variant is caught.
    #[test]
    fn a_correct_combination_of_the_wrong_blocks_fails() {
        let f = fixture(6, 64, 3);
        let ch = challenge(&[9; 32], f.run, 128, 16).unwrap();
        // Blocks of other positions (shifted by one), with their own σ̃: σ̃ do not open
        // at the positions asked.
        let shifted: Vec<u64> = ch.positions.iter().map(|p| (p + 1) % 128).collect();
        let picked: Vec<&Vec<u8>> = shifted.iter().map(|&p| &f.bytes[p as usize]).collect();
        let a = f.format.coded_to_bytes(&aggregate(&f.format, &ch.coefficients, &picked).unwrap()).unwrap();
        let their_sealed: Vec<Option<Sealed>> = shifted.iter().map(|&p| Some(f.sealed[p as usize])).collect();
        assert!(matches!(verify_run(&f.keys, &f.format, &ch, &a, &their_sealed, None), Err(SecretFault::SealedChecksum(_))));
        // The same aggregate with the right positions' σ̃: the checksums do not add up.
        let (_, right_sealed) = answer(&f, &ch, &f.bytes);
        assert_eq!(verify_run(&f.keys, &f.format, &ch, &a, &right_sealed, None), Err(SecretFault::Mismatch));
        // Blocks of an older build of the same run (a stale C), with that build's σ̃.
        let old = fixture(6, 0, 4);
        let (a_old, sealed_old) = answer(&old, &challenge(&[9; 32], f.run, 128, 16).unwrap(), &old.bytes);
        assert!(matches!(verify_run(&f.keys, &f.format, &ch, &a_old, &sealed_old, None), Err(SecretFault::SealedChecksum(_))));
        // ...and with the current build's σ̃.
        assert_eq!(verify_run(&f.keys, &f.format, &ch, &a_old, &right_sealed, None), Err(SecretFault::Mismatch));
        // A missing or tampered σ̃.
        let mut s = right_sealed.clone();
        s[0] = None;
        assert_eq!(verify_run(&f.keys, &f.format, &ch, &a, &s, None), Err(SecretFault::MissingChecksum(ch.positions[0])));
        let mut s = right_sealed.clone();
        if let Some(x) = s[1].as_mut() {
            x[0] ^= 1;
        }
        assert!(matches!(verify_run(&f.keys, &f.format, &ch, &a, &s, None), Err(SecretFault::SealedChecksum(_))));
        assert_eq!(
            verify_run(&f.keys, &f.format, &ch, &a, &right_sealed[1..], None),
            Err(SecretFault::SealedCount { got: 15, expected: 16 })
        );
    }

    /// Measured detection: a node that lost a fraction f of the run (erased blocks,
    /// answering zeros for them) fails the run's check at least as often as
    /// 1 − (1 − f)^λ predicts (minus a margin for the finite number of trials).
    #[test]
    fn detection_rate_meets_the_bound() {
        let f = fixture(7, 1, 5); // 256 coded blocks
        let lambda = 8u32;
        let frac = 0.125;
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let mut bad = f.bytes.clone();
        let mut lost = 0;
        for b in bad.iter_mut() {
            if rng.gen_bool(frac) {
                b.fill(0);
                lost += 1;
            }
        }
        let f_real = lost as f64 / bad.len() as f64;
        let trials = 400;
        let mut caught = 0;
        for t in 0..trials {
            let mut seed = [0u8; 32];
            seed[..8].copy_from_slice(&(t as u64).to_le_bytes());
            let ch = challenge(&seed, f.run, 256, lambda).unwrap();
            let (a, sealed) = answer(&f, &ch, &bad);
            let hit = ch.positions.iter().any(|&p| bad[p as usize] != f.bytes[p as usize]);
            let verdict = verify_run(&f.keys, &f.format, &ch, &a, &sealed, None);
            // Exact per trial: fails iff a lost block was sampled.
            assert_eq!(verdict.is_err(), hit, "trial {t}");
            caught += usize::from(verdict.is_err());
        }
        let bound = 1.0 - (1.0 - f_real).powi(lambda as i32);
        let rate = caught as f64 / trials as f64;
        assert!(rate >= bound - 0.08, "detection {rate:.3} below the bound {bound:.3} (f = {f_real:.3})");
    }
}
