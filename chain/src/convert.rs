//! Conversions between dpor-core values and the generated bindings, sample proofs
//! (ENCODING.md §8) and digest signatures (ENCODING.md §5).

use crate::bindings::DporMarket;
use crate::error::ChainError;
use alloy::signers::local::PrivateKeySigner;
use alloy::signers::SignerSync;
use alloy_primitives::{Bytes, B256};
use dpor_core::audit::{ChunkSample, RunTag};
use dpor_core::digest::Digest;
use dpor_core::merkle::chunk_proof;

/// The binding's `Digest` (the ABI struct of `contracts/src/lib/DporTypes.sol`).
pub type ChainDigest = DporMarket::Digest;
/// The binding's `SampleProof` (one 128-byte chunk with its chunk path and run path;
/// dispute answers).
pub type SampleProof = DporMarket::SampleProof;
/// The binding's `BlockProof` (one whole coded block with its run path; epoch proofs).
pub type BlockProof = DporMarket::BlockProof;

/// The epoch proof of the whole coded block at `position` of run `tag`
/// (ENCODING §8 v2): the block's bytes (8·s) and its run path (log2 run size hashes,
/// leaf to root). Errors: [`ChainError::Proof`] if the tag does not fit uint8.
pub fn block_proof(coded_block: &[u8], run_path: Vec<B256>, tag: RunTag, position: u64) -> Result<BlockProof, ChainError> {
    let run_tag = u8::try_from(tag.0).map_err(|_| ChainError::Proof(format!("run tag {} above 255", tag.0)))?;
    Ok(BlockProof { runTag: run_tag, position, codedBlock: Bytes::copy_from_slice(coded_block), runPath: run_path })
}

/// Core digest → the binding's struct (same fields, same order).
pub fn to_chain_digest(d: &Digest) -> ChainDigest {
    ChainDigest {
        dealId: d.dealId,
        version: d.version,
        numBlocks: d.numBlocks,
        writeCount: d.writeCount,
        rebuildCount: d.rebuildCount,
        rootU: d.rootU,
        rootC: d.rootC,
        levelRoots: d.levelRoots.clone(),
    }
}

/// The binding's struct (e.g. decoded from a `DigestPosted` log) → core digest.
pub fn from_chain_digest(d: &ChainDigest) -> Digest {
    Digest {
        dealId: d.dealId,
        version: d.version,
        numBlocks: d.numBlocks,
        writeCount: d.writeCount,
        rebuildCount: d.rebuildCount,
        rootU: d.rootU,
        rootC: d.rootC,
        levelRoots: d.levelRoots.clone(),
    }
}

/// The sample proof of chunk `chunk` of the coded block at `position` of run `tag`,
/// from the coded block's bytes (8·s bytes) and its run path (log2 run size hashes,
/// leaf to root, as [`dpor_core::merkle::MerkleTree::path`] returns it).
///
/// Errors: [`ChainError::Proof`] if the chunk index is past the block's chunks or the
/// tag / position / chunk do not fit the ABI types (uint8 / uint64 / uint32).
pub fn sample_proof(
    coded_block: &[u8],
    run_path: Vec<B256>,
    tag: RunTag,
    position: u64,
    chunk: u64,
) -> Result<SampleProof, ChainError> {
    let run_tag = u8::try_from(tag.0).map_err(|_| ChainError::Proof(format!("run tag {} above 255", tag.0)))?;
    let chunk_index = u32::try_from(chunk).map_err(|_| ChainError::Proof(format!("chunk index {chunk} above u32")))?;
    let (bytes, chunk_path) = chunk_proof(coded_block, chunk).map_err(|e| ChainError::Proof(e.to_string()))?;
    Ok(SampleProof {
        runTag: run_tag,
        position,
        chunkIndex: chunk_index,
        chunk: Bytes::copy_from_slice(&bytes),
        chunkPath: chunk_path,
        runPath: run_path,
    })
}

/// [`sample_proof`] for one [`ChunkSample`] of an epoch proof or a dispute.
pub fn sample_proof_for(coded_block: &[u8], run_path: Vec<B256>, s: &ChunkSample) -> Result<SampleProof, ChainError> {
    sample_proof(coded_block, run_path, s.tag, s.position, s.chunk)
}

/// Signs a digest hash (the EIP-712 signing hash of ENCODING.md §5, from
/// [`Digest::digest_hash`]) as the contract expects: 65 bytes `r ‖ s ‖ v` with
/// v ∈ {27, 28}, which OpenZeppelin's `ECDSA.tryRecover` accepts. The signature is
/// deterministic (RFC 6979).
///
/// Errors: [`ChainError::InvalidKey`] if the signer fails (not expected for a valid key).
pub fn sign_digest(signer: &PrivateKeySigner, hash: B256) -> Result<Bytes, ChainError> {
    let sig = signer.sign_hash_sync(&hash).map_err(|e| ChainError::InvalidKey(format!("signing failed: {e}")))?;
    Ok(Bytes::copy_from_slice(&sig.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{parse_key, ANVIL_KEYS};
    use alloy_primitives::{Address, Signature, U256};

    fn digest() -> Digest {
        Digest {
            dealId: U256::from(7u64),
            version: 3,
            numBlocks: 8,
            writeCount: 5,
            rebuildCount: 1,
            rootU: B256::repeat_byte(1),
            rootC: B256::repeat_byte(2),
            levelRoots: vec![B256::repeat_byte(3), B256::repeat_byte(4)],
        }
    }

    #[test]
    fn digest_round_trips() {
        let d = digest();
        assert_eq!(from_chain_digest(&to_chain_digest(&d)), d);
    }

    #[test]
    fn signature_is_65_bytes_v_27_28_and_recovers() {
        let k = parse_key(ANVIL_KEYS[2]).unwrap();
        let h = digest().digest_hash(31337, Address::repeat_byte(9));
        let sig = sign_digest(&k, h).unwrap();
        assert_eq!(sig.len(), 65);
        assert!(sig[64] == 27 || sig[64] == 28);
        let parsed = Signature::try_from(&sig[..]).unwrap();
        assert_eq!(parsed.recover_address_from_prehash(&h).unwrap(), k.address());
    }

    #[test]
    fn sample_proof_rejects_chunk_past_the_end() {
        let block = vec![0u8; 300]; // 3 chunks
        assert!(sample_proof(&block, vec![], RunTag::C, 0, 2).is_ok());
        assert!(matches!(sample_proof(&block, vec![], RunTag::C, 0, 3), Err(ChainError::Proof(_))));
    }
}
