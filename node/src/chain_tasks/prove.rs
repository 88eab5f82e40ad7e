//! The pure part of proving: which samples an epoch asks for, building the sample
//! proofs from the node's runs, and checking them against the digest's run roots
//! before any gas is spent (docs/CONTRACTS.md §5, ENCODING.md §8).

use super::NodeRuns;
use alloy_primitives::B256;
use dpor_chain::{sample_proof, verify_sample_proof, SampleProof};
use dpor_core::audit::{epoch_samples, EpochSample, RunTag};
use dpor_core::block::BlockFormat;
use dpor_core::digest::Digest;
use thiserror::Error;

/// Why a proof could not be built.
#[derive(Debug, Error)]
pub enum ProveError {
    /// The digest names no such run (or its build time cannot be derived).
    #[error("run {tag} is not in digest version {version}")]
    UnknownRun {
        /// The run tag asked for.
        tag: RunTag,
        /// The digest version.
        version: u64,
    },
    /// The node's storage could not return the block.
    #[error("reading {tag} position {position}: {source}")]
    Storage {
        /// The run.
        tag: RunTag,
        /// The position.
        position: u64,
        /// The storage error.
        source: anyhow::Error,
    },
    /// The proof was built but does not verify against the digest: the data is lost
    /// or corrupted. Sending it would only burn gas.
    #[error("{0}")]
    Invalid(dpor_chain::ChainError),
    /// The deal's block size is not a valid β.
    #[error("block size {0}: {1}")]
    BlockSize(u32, String),
}

/// Bytes of a coded block (8·s) for a deal of block size β = `block_size`.
pub fn coded_block_bytes(block_size: u32) -> Result<usize, ProveError> {
    BlockFormat::new(block_size as usize)
        .map(|f| f.coded_block_bytes())
        .map_err(|e| ProveError::BlockSize(block_size, e.to_string()))
}

/// The K samples of an epoch (ENCODING.md §8) against `digest` (hash `digest_hash`).
pub fn epoch_plan(seed: B256, digest_hash: B256, digest: &Digest, coded_block_bytes: usize, k: u8) -> Vec<EpochSample> {
    epoch_samples(seed, digest_hash, digest.numBlocks, digest.writeCount, coded_block_bytes, u32::from(k.max(1)))
}

/// Builds the proof of one sample from the node's runs and verifies it locally
/// against `digest`'s run root.
pub fn prove_sample(
    runs: &dyn NodeRuns,
    deal: u64,
    digest: &Digest,
    coded_block_bytes: usize,
    s: &EpochSample,
) -> Result<SampleProof, ProveError> {
    let run = digest
        .run_ids()
        .into_iter()
        .find(|(id, _, _)| id.tag == s.tag)
        .map(|(id, _, _)| id)
        .ok_or(ProveError::UnknownRun { tag: s.tag, version: digest.version })?;
    let (block, path) = runs
        .coded_block(deal, run, s.position)
        .map_err(|source| ProveError::Storage { tag: s.tag, position: s.position, source })?;
    let proof = sample_proof(&block, path, s.tag, s.position, s.chunk).map_err(ProveError::Invalid)?;
    verify_sample_proof(digest, coded_block_bytes, &proof).map_err(ProveError::Invalid)?;
    Ok(proof)
}

/// All K proofs of an epoch, each verified locally; the first failure aborts.
pub fn prove_epoch(
    runs: &dyn NodeRuns,
    deal: u64,
    digest: &Digest,
    digest_hash: B256,
    seed: B256,
    coded_block_bytes: usize,
    k: u8,
) -> Result<Vec<SampleProof>, ProveError> {
    epoch_plan(seed, digest_hash, digest, coded_block_bytes, k)
        .iter()
        .map(|s| prove_sample(runs, deal, digest, coded_block_bytes, s))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpor_chain::StateFixture;
    use dpor_core::RunId;
    use std::collections::HashSet;
    use std::sync::Mutex;

    /// Runs from an in-memory state; positions in `lost` come back corrupted.
    struct Fake {
        fx: StateFixture,
        lost: Mutex<HashSet<(RunTag, u64)>>,
    }

    impl NodeRuns for Fake {
        fn coded_block(&self, _deal: u64, run: RunId, position: u64) -> anyhow::Result<(Vec<u8>, Vec<B256>)> {
            let (mut b, p) = self.fx.coded_block(run, position).ok_or_else(|| anyhow::anyhow!("no block"))?;
            if self.lost.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.contains(&(run.tag, position)) {
                b.iter_mut().for_each(|x| *x ^= 0xff);
            }
            Ok((b, p))
        }
        fn digest_posted(&self, _: u64, _: &Digest) -> anyhow::Result<()> {
            Ok(())
        }
        fn dispute_opened(&self, _: u64, _: u64, _: &Digest) -> anyhow::Result<()> {
            Ok(())
        }
        fn dispute_closed(&self, _: u64, _: u64) -> anyhow::Result<()> {
            Ok(())
        }
    }

    fn fake(writes: u64) -> Fake {
        Fake { fx: StateFixture::new(256, 8, writes, 3).unwrap(), lost: Mutex::new(HashSet::new()) }
    }

    #[test]
    fn honest_runs_prove_every_epoch_and_every_sample() {
        let f = fake(5); // C + levels 0 and 2
        let d = f.fx.digest(1, 1);
        let cb = coded_block_bytes(256).unwrap();
        assert_eq!(cb, f.fx.coded_block_bytes());
        for e in 0..20u8 {
            let seed = B256::repeat_byte(e);
            let proofs = prove_epoch(&f, 1, &d, B256::repeat_byte(0x42), seed, cb, 8).unwrap();
            assert_eq!(proofs.len(), 8);
            let plan = epoch_plan(seed, B256::repeat_byte(0x42), &d, cb, 8);
            for (p, s) in proofs.iter().zip(&plan) {
                assert_eq!((u32::from(p.runTag), p.position, u64::from(p.chunkIndex)), (s.tag.0, s.position, s.chunk));
            }
        }
        // every (run, position, chunk) a dispute can name
        for (tag, size, _) in d.runs() {
            for pos in 0..size {
                for chunk in 0..3 {
                    prove_sample(&f, 1, &d, cb, &EpochSample { tag, position: pos, chunk }).unwrap();
                }
            }
        }
    }

    #[test]
    fn lost_blocks_are_caught_before_sending() {
        let f = fake(3);
        let d = f.fx.digest(1, 1);
        let cb = f.fx.coded_block_bytes();
        f.lost.lock().unwrap().insert((RunTag::C, 4));
        let s = EpochSample { tag: RunTag::C, position: 4, chunk: 1 };
        assert!(matches!(prove_sample(&f, 1, &d, cb, &s), Err(ProveError::Invalid(_))));
        // other blocks still prove
        prove_sample(&f, 1, &d, cb, &EpochSample { position: 5, ..s }).unwrap();
        // a run the digest does not have
        let none = EpochSample { tag: RunTag::level(2), position: 0, chunk: 0 };
        assert!(matches!(prove_sample(&f, 1, &d, cb, &none), Err(ProveError::UnknownRun { .. })));
        // a digest for other roots (e.g. a newer state) does not verify
        let other = StateFixture::new(256, 8, 3, 9).unwrap().digest(1, 1);
        assert!(matches!(
            prove_sample(&f, 1, &other, cb, &EpochSample { position: 5, ..s }),
            Err(ProveError::Invalid(_))
        ));
    }
}
