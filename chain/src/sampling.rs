//! The epoch sample rule of the market (docs/ENCODING.md §8, "dpor.epoch.v2"), mirrored
//! from `contracts/src/lib/DporSampling.sol` so provers and auditors derive the samples
//! without a view call (and tests check the contract against an independent copy).
//!
//! For the per-deal sample seed S (§9), the hash D of the digest in force for the
//! epoch, N and its write count t: R = 1 + popcount(t) runs in run order (C, then the
//! filled levels ascending); `u = keccak256(abi.encode(EPOCH_DOMAIN, S, D)) mod R`;
//! sample j is run `(u + j) mod R` at position
//! `keccak256(abi.encode(EPOCH_DOMAIN, S, D, j)) mod size(run)` (size a power of two:
//! exact). Each sample is one WHOLE coded block.

use alloy_primitives::{keccak256, B256, U256};
use dpor_core::audit::RunTag;
use std::sync::OnceLock;

/// keccak256("dpor.epoch.v2").
pub fn epoch_domain_v2() -> B256 {
    static D: OnceLock<B256> = OnceLock::new();
    *D.get_or_init(|| keccak256(b"dpor.epoch.v2"))
}

/// One sample of an epoch proof: the whole coded block at `position` of run `tag`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockSample {
    /// The run (0 = C, ℓ + 1 = level ℓ).
    pub tag: RunTag,
    /// Position in the run.
    pub position: u64,
}

fn hash_words(words: &[B256]) -> U256 {
    let mut buf = Vec::with_capacity(32 * words.len());
    for w in words {
        buf.extend_from_slice(w.as_slice());
    }
    U256::from_be_bytes(keccak256(&buf).0)
}

/// The per-deal sample seed S = keccak256(abi.encode(globalSeed, dealId, epoch))
/// (ENCODING §9) from the global epoch seed.
pub fn sample_seed(global_seed: B256, deal_id: u64, epoch: u64) -> B256 {
    B256::from(hash_words(&[global_seed, B256::from(U256::from(deal_id)), B256::from(U256::from(epoch))]))
}

/// The runs of a digest with N = `num_blocks` and write count t, in run order:
/// (tag, size in coded blocks).
pub fn runs_in_order(num_blocks: u64, write_count: u64) -> Vec<(RunTag, u64)> {
    let mut runs = vec![(RunTag::C, num_blocks.saturating_mul(2))];
    for level in 0..64u32 {
        if (write_count >> level) & 1 == 1 {
            // Level ℓ holds 2^(ℓ+1) coded blocks (ℓ < log2 N ≤ 62 for any real deal).
            runs.push((RunTag::level(level), if level < 63 { 2u64 << level } else { u64::MAX }));
        }
    }
    runs
}

/// The `count` samples of an epoch proof (ENCODING §8 v2) for sample seed `seed`,
/// digest hash `digest_hash`, N and t. Deterministic.
pub fn epoch_block_samples(seed: B256, digest_hash: B256, num_blocks: u64, write_count: u64, count: u32) -> Vec<BlockSample> {
    let runs = runs_in_order(num_blocks, write_count);
    let r = U256::from(runs.len() as u64);
    let dom = epoch_domain_v2();
    let u = (hash_words(&[dom, seed, digest_hash]) % r).to::<u64>();
    (0..u64::from(count))
        .map(|j| {
            let (tag, size) = runs[((u + j) % runs.len() as u64) as usize];
            let h = hash_words(&[dom, seed, digest_hash, B256::from(U256::from(j))]);
            let position = (h & U256::from(size.saturating_sub(1))).to::<u64>();
            BlockSample { tag, position }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_visit_every_run_in_turn() {
        // t = 0b101: C, H0 (2 blocks), H2 (8 blocks).
        let s = epoch_block_samples(B256::repeat_byte(1), B256::repeat_byte(2), 16, 5, 6);
        let tags: Vec<u32> = s.iter().map(|x| x.tag.0).collect();
        let first = tags[0];
        let order = [0u32, 1, 3];
        let i0 = order.iter().position(|&t| t == first).unwrap();
        for (j, t) in tags.iter().enumerate() {
            assert_eq!(*t, order[(i0 + j) % 3]);
        }
        for x in &s {
            let size = match x.tag.0 {
                0 => 32,
                1 => 2,
                _ => 8,
            };
            assert!(x.position < size);
        }
    }

    #[test]
    fn run_sizes() {
        assert_eq!(runs_in_order(8, 0b110), vec![(RunTag::C, 16), (RunTag(2), 4), (RunTag(3), 8)]);
    }
}
