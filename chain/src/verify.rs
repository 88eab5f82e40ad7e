//! Local verification of a sample proof against a digest's run roots, exactly the
//! check `DporDigest.verifySample` makes on chain (docs/CONTRACTS.md §5, ENCODING §2–3,
//! §8): chunk → chunk path → block root → run leaf → run path → the run's root. A node
//! runs it before sending a proof so that it never burns gas on one that must revert.

use crate::convert::{BlockProof, SampleProof};
use crate::error::ChainError;
use dpor_core::audit::RunTag;
use dpor_core::digest::Digest;
use dpor_core::merkle::{block_root, chunk_count, chunk_depth, chunk_leaf, root_from_path, run_leaf, verify_path, CHUNK_BYTES};

/// Checks `proof` against the run roots of `digest` for coded blocks of
/// `coded_block_bytes` bytes (8·s).
///
/// Errors: [`ChainError::Proof`] naming what failed (unknown run, position or chunk out
/// of range, path length, root mismatch).
pub fn verify_sample_proof(digest: &Digest, coded_block_bytes: usize, proof: &SampleProof) -> Result<(), ChainError> {
    let tag = RunTag(u32::from(proof.runTag));
    let (_, size, root) = digest
        .runs()
        .into_iter()
        .find(|(t, _, _)| *t == tag)
        .ok_or_else(|| ChainError::Proof(format!("run {tag} is not in digest version {}", digest.version)))?;
    if proof.position >= size {
        return Err(ChainError::Proof(format!("position {} past run {tag} of {size} blocks", proof.position)));
    }
    let chunks = chunk_count(coded_block_bytes) as u64;
    if u64::from(proof.chunkIndex) >= chunks {
        return Err(ChainError::Proof(format!("chunk {} past the block's {chunks} chunks", proof.chunkIndex)));
    }
    let chunk: &[u8; CHUNK_BYTES] = proof
        .chunk
        .as_ref()
        .try_into()
        .map_err(|_| ChainError::Proof(format!("chunk has {} bytes, expected {CHUNK_BYTES}", proof.chunk.len())))?;
    let depth = chunk_depth(coded_block_bytes);
    if proof.chunkPath.len() != depth as usize {
        return Err(ChainError::Proof(format!("chunk path of {} hashes, expected {depth}", proof.chunkPath.len())));
    }
    let block_root = root_from_path(chunk_leaf(chunk), u64::from(proof.chunkIndex), &proof.chunkPath);
    verify_path(&root, size.trailing_zeros(), proof.position, run_leaf(proof.position, &block_root), &proof.runPath)
        .map_err(|e| ChainError::Proof(format!("run {tag} position {}: {e}", proof.position)))
}

/// Checks an epoch `proof` (a whole coded block, ENCODING §8 v2) against the run roots
/// of `digest` for coded blocks of `coded_block_bytes` bytes, exactly as
/// `DporVerifier` does: the block has exactly `coded_block_bytes` bytes, its chunk-tree
/// root is the run leaf's block root, and the run path leads to the run's root.
///
/// Errors: [`ChainError::Proof`] naming what failed.
pub fn verify_block_proof(digest: &Digest, coded_block_bytes: usize, proof: &BlockProof) -> Result<(), ChainError> {
    let tag = RunTag(u32::from(proof.runTag));
    let (_, size, root) = digest
        .runs()
        .into_iter()
        .find(|(t, _, _)| *t == tag)
        .ok_or_else(|| ChainError::Proof(format!("run {tag} is not in digest version {}", digest.version)))?;
    if proof.position >= size {
        return Err(ChainError::Proof(format!("position {} past run {tag} of {size} blocks", proof.position)));
    }
    if proof.codedBlock.len() != coded_block_bytes {
        return Err(ChainError::Proof(format!(
            "coded block of {} bytes, expected {coded_block_bytes}",
            proof.codedBlock.len()
        )));
    }
    let block_root = block_root(&proof.codedBlock);
    verify_path(&root, size.trailing_zeros(), proof.position, run_leaf(proof.position, &block_root), &proof.runPath)
        .map_err(|e| ChainError::Proof(format!("run {tag} position {}: {e}", proof.position)))
}

/// What a watcher knows of one committed deal epoch from the chain, to check the
/// node's response against (docs/COMMITMENTS.md §7).
#[derive(Debug, Clone)]
pub struct CommittedEpoch<'a> {
    /// The deal.
    pub deal_id: u64,
    /// The deal epoch.
    pub epoch: u64,
    /// The digest in force at the epoch's start (its preimage, from the logs).
    pub digest: &'a Digest,
    /// Its EIP-712 hash (what the samples are drawn from).
    pub digest_hash: alloy_primitives::B256,
    /// The deal's sample seed S of the epoch.
    pub sample_seed: alloy_primitives::B256,
    /// The committed root (`getCommitment` / `EpochCommitted`).
    pub root: alloy_primitives::B256,
    /// K of the deal.
    pub samples_per_epoch: u8,
    /// 8·s, bytes of a coded block of the deal.
    pub coded_block_bytes: usize,
}

/// Checks a committed epoch response exactly as `answerChallenge` would on chain: the
/// digest version is the one in force, the K proofs name the samples drawn from
/// (S, digest hash) in order, each whole block verifies against its run root, and the
/// leaf built from (deal, epoch, version, responseHash(S, blocks)) leads through
/// `leaf_path` from `leaf_index` (< 2^path length) to the committed root. Exactly what
/// the chain accepts, no more: a watcher challenging on anything stricter would lose
/// its bond to an answer the chain takes.
///
/// Errors: [`ChainError::Proof`] naming the first thing wrong.
pub fn verify_epoch_response(
    at: &CommittedEpoch<'_>,
    version: u64,
    proofs: &[BlockProof],
    leaf_index: u64,
    leaf_path: &[alloy_primitives::B256],
) -> Result<(), ChainError> {
    if version != at.digest.version {
        return Err(ChainError::Proof(format!(
            "response bound to digest version {version}, version {} is in force",
            at.digest.version
        )));
    }
    let k = at.samples_per_epoch.max(1);
    let plan = dpor_core::audit::epoch_block_samples(
        at.sample_seed,
        at.digest_hash,
        at.digest.numBlocks,
        at.digest.writeCount,
        u32::from(k),
    );
    if proofs.len() != plan.len() {
        return Err(ChainError::Proof(format!("{} samples, the epoch draws {}", proofs.len(), plan.len())));
    }
    for (j, (p, s)) in proofs.iter().zip(&plan).enumerate() {
        if u32::from(p.runTag) != s.tag.0 || p.position != s.position {
            return Err(ChainError::Proof(format!(
                "sample {j} names run {} position {}, the epoch draws run {} position {}",
                p.runTag, p.position, s.tag, s.position
            )));
        }
        verify_block_proof(at.digest, at.coded_block_bytes, p)?;
    }
    let blocks: Vec<&[u8]> = proofs.iter().map(|p| p.codedBlock.as_ref()).collect();
    let entry = dpor_core::commitment::Entry {
        deal_id: at.deal_id,
        epoch: at.epoch,
        version,
        response_hash: dpor_core::commitment::response_hash(at.sample_seed, &blocks),
    };
    if leaf_path.len() >= 64 || leaf_index >> leaf_path.len() != 0 {
        return Err(ChainError::Proof(format!("leaf index {leaf_index} past a path of {} hashes", leaf_path.len())));
    }
    if root_from_path(entry.leaf(), leaf_index, leaf_path) != at.root {
        return Err(ChainError::Proof("the entry does not lead to the committed root".into()));
    }
    Ok(())
}

/// A whole-block proof from its parts (a served response's sample, a kept one).
pub fn block_proof_from(run_tag: u8, position: u64, coded_block: &[u8], run_path: &[alloy_primitives::B256]) -> BlockProof {
    BlockProof {
        runTag: run_tag,
        position,
        codedBlock: alloy_primitives::Bytes::copy_from_slice(coded_block),
        runPath: run_path.to_vec(),
    }
}
