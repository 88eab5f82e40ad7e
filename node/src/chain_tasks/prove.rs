//! The pure part of proving: which whole coded blocks an epoch asks for (ENCODING.md
//! §8 "dpor.epoch.v2"), building the block proofs (epochs) and chunk proofs (dispute
//! answers) from the node's runs, and checking them against the digest's run roots
//! before any gas is spent (docs/CONTRACTS.md §5).

use super::NodeRuns;
use alloy_primitives::B256;
use dpor_chain::{
    block_proof, epoch_block_samples, sample_proof, verify_block_proof, verify_sample_proof, BlockProof, BlockSample,
    SampleProof,
};
use dpor_core::audit::{ChunkSample, RunTag};
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

/// The K whole-block samples of an epoch (ENCODING.md §8 v2) for sample seed `seed`
/// against `digest` (hash `digest_hash`, the digest in force at the epoch's start).
pub fn epoch_plan(seed: B256, digest_hash: B256, digest: &Digest, k: u8) -> Vec<BlockSample> {
    epoch_block_samples(seed, digest_hash, digest.numBlocks, digest.writeCount, u32::from(k.max(1)))
}

fn run_of(digest: &Digest, tag: RunTag) -> Result<dpor_core::RunId, ProveError> {
    digest
        .run_ids()
        .into_iter()
        .find(|(id, _, _)| id.tag == tag)
        .map(|(id, _, _)| id)
        .ok_or(ProveError::UnknownRun { tag, version: digest.version })
}

/// Builds the epoch proof of one whole coded block from the node's runs and verifies
/// it locally against `digest`'s run root.
pub fn prove_block(
    runs: &dyn NodeRuns,
    deal: u64,
    digest: &Digest,
    coded_block_bytes: usize,
    s: &BlockSample,
) -> Result<BlockProof, ProveError> {
    let run = run_of(digest, s.tag)?;
    let (block, path) = runs
        .coded_block(deal, run, s.position)
        .map_err(|source| ProveError::Storage { tag: s.tag, position: s.position, source })?;
    let proof = block_proof(&block, path, s.tag, s.position).map_err(ProveError::Invalid)?;
    verify_block_proof(digest, coded_block_bytes, &proof).map_err(ProveError::Invalid)?;
    Ok(proof)
}

/// Builds the proof of one sample from the node's runs and verifies it locally
/// against `digest`'s run root.
pub fn prove_sample(
    runs: &dyn NodeRuns,
    deal: u64,
    digest: &Digest,
    coded_block_bytes: usize,
    s: &ChunkSample,
) -> Result<SampleProof, ProveError> {
    let run = run_of(digest, s.tag)?;
    let (block, path) = runs
        .coded_block(deal, run, s.position)
        .map_err(|source| ProveError::Storage { tag: s.tag, position: s.position, source })?;
    let proof = sample_proof(&block, path, s.tag, s.position, s.chunk).map_err(ProveError::Invalid)?;
    verify_sample_proof(digest, coded_block_bytes, &proof).map_err(ProveError::Invalid)?;
    Ok(proof)
}

/// All K whole-block proofs of an epoch, each verified locally; the first failure aborts.
pub fn prove_epoch(
    runs: &dyn NodeRuns,
    deal: u64,
    digest: &Digest,
    digest_hash: B256,
    seed: B256,
    coded_block_bytes: usize,
    k: u8,
) -> Result<Vec<BlockProof>, ProveError> {
    epoch_plan(seed, digest_hash, digest, k).iter().map(|s| prove_block(runs, deal, digest, coded_block_bytes, s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpor_chain::StateFixture;
    use dpor_core::RunId;
    use std::collections::HashSet;
    use std::sync::Mutex;

    /// Runs from an in-memory state; positions in `lost` come back corrupted, and
    /// every block passes through `keep` (what a cheating node keeps of it).
    struct Fake {
        fx: StateFixture,
        lost: Mutex<HashSet<(RunTag, u64)>>,
        keep: fn(&mut [u8]),
    }

    impl NodeRuns for Fake {
        fn coded_block(&self, _deal: u64, run: RunId, position: u64) -> anyhow::Result<(Vec<u8>, Vec<B256>)> {
            let (mut b, p) = self.fx.coded_block(run, position).ok_or_else(|| anyhow::anyhow!("no block"))?;
            if self.lost.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.contains(&(run.tag, position)) {
                b.iter_mut().for_each(|x| *x ^= 0xff);
            }
            (self.keep)(&mut b);
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
        Fake { fx: StateFixture::new(256, 8, writes, 3).unwrap(), lost: Mutex::new(HashSet::new()), keep: |_| {} }
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
            let plan = epoch_plan(seed, B256::repeat_byte(0x42), &d, 8);
            for (p, s) in proofs.iter().zip(&plan) {
                assert_eq!((u32::from(p.runTag), p.position, p.codedBlock.len()), (s.tag.0, s.position, cb));
            }
        }
        // every (run, position, chunk) a dispute can name
        for (tag, size, _) in d.runs() {
            for pos in 0..size {
                for chunk in 0..3 {
                    prove_sample(&f, 1, &d, cb, &ChunkSample { tag, position: pos, chunk }).unwrap();
                }
            }
        }
    }

    /// A node that keeps only the first half of every coded block: every chunk sample
    /// in the first half would pass, but no whole-block proof does (finding 3).
    #[test]
    fn half_kept_blocks_never_prove_a_whole_block() {
        let f = Fake {
            keep: |b| {
                let h = b.len() / 2;
                b[h..].iter_mut().for_each(|x| *x = 0);
            },
            ..fake(5)
        };
        let d = f.fx.digest(1, 1);
        let cb = f.fx.coded_block_bytes();
        // (A smarter cheater that also kept the chunk-tree hashes could open chunks of
        // the kept half; a whole-block proof needs the bytes of every chunk.)
        for e in 0..20u8 {
            let r = prove_epoch(&f, 1, &d, B256::repeat_byte(0x42), B256::repeat_byte(e), cb, 1);
            assert!(matches!(r, Err(ProveError::Invalid(_))), "epoch {e}");
        }
    }

    #[test]
    fn lost_blocks_are_caught_before_sending() {
        let f = fake(3);
        let d = f.fx.digest(1, 1);
        let cb = f.fx.coded_block_bytes();
        f.lost.lock().unwrap().insert((RunTag::C, 4));
        let s = ChunkSample { tag: RunTag::C, position: 4, chunk: 1 };
        assert!(matches!(prove_sample(&f, 1, &d, cb, &s), Err(ProveError::Invalid(_))));
        // other blocks still prove
        prove_sample(&f, 1, &d, cb, &ChunkSample { position: 5, ..s }).unwrap();
        // a whole-block proof of the lost block fails too, of another passes
        assert!(matches!(prove_block(&f, 1, &d, cb, &BlockSample { tag: RunTag::C, position: 4 }), Err(ProveError::Invalid(_))));
        prove_block(&f, 1, &d, cb, &BlockSample { tag: RunTag::C, position: 5 }).unwrap();
        // a run the digest does not have
        let none = ChunkSample { tag: RunTag::level(2), position: 0, chunk: 0 };
        assert!(matches!(prove_sample(&f, 1, &d, cb, &none), Err(ProveError::UnknownRun { .. })));
        // a digest for other roots (e.g. a newer state) does not verify
        let other = StateFixture::new(256, 8, 3, 9).unwrap().digest(1, 1);
        assert!(matches!(
            prove_sample(&f, 1, &other, cb, &ChunkSample { position: 5, ..s }),
            Err(ProveError::Invalid(_))
        ));
    }
}
