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
