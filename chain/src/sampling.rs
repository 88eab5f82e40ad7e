//! The epoch sample rule of the market (docs/ENCODING.md §8, "dpor.epoch.v2"), from dpor-core
//! (the same rule as `contracts/src/lib/DporSampling.sol`) so provers and auditors derive the samples
//! without a view call (and tests check the contract against an independent copy).
//!
//! For the per-deal sample seed S (§9), the hash D of the digest in force for the
//! epoch, N and its write count t: R = 1 + popcount(t) runs in run order (C, then the
//! filled levels ascending); `u = keccak256(abi.encode(EPOCH_DOMAIN, S, D)) mod R`;
//! sample j is run `(u + j) mod R` at position
//! `keccak256(abi.encode(EPOCH_DOMAIN, S, D, j)) mod size(run)` (size a power of two:
//! exact). Each sample is one WHOLE coded block.

pub use dpor_core::audit::{
    epoch_block_samples, epoch_domain_v2, runs_in_order, sample_seed, BlockSample,
};

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::B256;
    use dpor_core::audit::RunTag;

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
