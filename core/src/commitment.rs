//! Epoch commitments (docs/COMMITMENTS.md): one Merkle root per provider per global
//! epoch over its responses for all of its deals, instead of one on-chain proof per deal.
//!
//! - [`response_hash`]: `keccak256(S ‖ B_0 ‖ … ‖ B_{K−1})`, the sampled whole coded
//!   blocks salted with the deal's sample seed S (COMMITMENTS §1): it cannot be computed
//!   without the blocks once S is known.
//! - [`leaf`]: `keccak256(0x04 ‖ u256 dealId ‖ u64 epoch ‖ u64 version ‖ responseHash)`.
//! - [`Commitment`]: the tree over the leaves sorted by deal id, padded with zero leaves
//!   to a power of two, inner nodes `keccak256(0x01 ‖ l ‖ r)` ([`crate::merkle::node`]);
//!   the same rule as `DporCommitment` in the contracts.
//!
//! Pure: no I/O. The node builds commitments, watchers check entries with
//! [`verify_entry`].

use crate::merkle::{root_from_path, MerkleTree};
use alloy_primitives::{keccak256, B256};
use thiserror::Error;

/// Domain byte of a commitment leaf (ENCODING §2 uses 0x00–0x03).
pub const TAG_COMMIT_LEAF: u8 = 0x04;

/// Errors of building or checking a commitment.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CommitmentError {
    /// Entries must be sorted by deal id, strictly ascending (no duplicates).
    #[error("entries are not sorted by deal id without duplicates (deal {0})")]
    Unsorted(u64),
    /// The deal is not in the commitment.
    #[error("deal {0} has no entry in the commitment")]
    Missing(u64),
    /// A path of the wrong length for the commitment's leaf count.
    #[error("path has {got} siblings, a commitment of {leaves} leaves needs {expected}")]
    PathLength {
        /// Siblings given.
        got: usize,
        /// Siblings needed (log2 of the padded leaf count).
        expected: usize,
        /// Leaves committed.
        leaves: u32,
    },
    /// The leaf index is not below the committed leaf count.
    #[error("leaf index {index} is not below the committed leaf count {leaves}")]
    Index {
        /// The index.
        index: u64,
        /// Leaves committed.
        leaves: u32,
    },
    /// The path does not lead to the committed root.
    #[error("the entry does not lead to the committed root")]
    Mismatch,
}

/// The response hash of one deal epoch (COMMITMENTS §1):
/// `keccak256(abi.encodePacked(S, B_0, …, B_{K−1}))`, `S` the deal's sample seed
/// ([`crate::audit::sample_seed`]) and `B_j` the whole coded blocks of the epoch's K
/// samples in order (each 8·(1 + ⌈β/7⌉) bytes).
pub fn response_hash<B: AsRef<[u8]>>(sample_seed: B256, blocks: &[B]) -> B256 {
    let len = 32 + blocks.iter().map(|b| b.as_ref().len()).sum::<usize>();
    let mut buf = Vec::with_capacity(len);
    buf.extend_from_slice(sample_seed.as_slice());
    for b in blocks {
        buf.extend_from_slice(b.as_ref());
    }
    keccak256(&buf)
}

/// The leaf of one deal epoch (COMMITMENTS §1):
/// `keccak256(0x04 ‖ u256be(dealId) ‖ u64be(epoch) ‖ u64be(version) ‖ responseHash)`
/// (81 bytes, Solidity `abi.encodePacked(uint8, uint256, uint64, uint64, bytes32)`).
/// `epoch` is the deal epoch (0-based), `version` the digest in force at its start.
pub fn leaf(deal_id: u64, epoch: u64, version: u64, response_hash: B256) -> B256 {
    let mut buf = [0u8; 81];
    buf[0] = TAG_COMMIT_LEAF;
    buf[25..33].copy_from_slice(&deal_id.to_be_bytes());
    buf[33..41].copy_from_slice(&epoch.to_be_bytes());
    buf[41..49].copy_from_slice(&version.to_be_bytes());
    buf[49..81].copy_from_slice(response_hash.as_slice());
    keccak256(buf)
}

/// One deal's entry of a commitment: what its leaf is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The deal.
    pub deal_id: u64,
    /// The deal epoch (0-based).
    pub epoch: u64,
    /// Version of the digest in force at the epoch's start (≥ 1).
    pub version: u64,
    /// [`response_hash`] of the epoch's samples.
    pub response_hash: B256,
}

impl Entry {
    /// The entry's [`leaf`].
    pub fn leaf(&self) -> B256 {
        leaf(self.deal_id, self.epoch, self.version, self.response_hash)
    }
}

/// A provider's commitment for one global epoch: the tree over its entries' leaves,
/// sorted by deal id (COMMITMENTS §2).
#[derive(Debug, Clone)]
pub struct Commitment {
    deal_ids: Vec<u64>,
    tree: MerkleTree,
}

impl Commitment {
    /// Builds the commitment over `entries`, which must be sorted by deal id strictly
    /// ascending ([`CommitmentError::Unsorted`] otherwise). No entries: root zero.
    pub fn new(entries: &[Entry]) -> Result<Self, CommitmentError> {
        for w in entries.windows(2) {
            if w[0].deal_id >= w[1].deal_id {
                return Err(CommitmentError::Unsorted(w[1].deal_id));
            }
        }
        let leaves: Vec<B256> = entries.iter().map(Entry::leaf).collect();
        Ok(Self { deal_ids: entries.iter().map(|e| e.deal_id).collect(), tree: MerkleTree::padded(leaves) })
    }

    /// The root posted on chain (`commitEpoch`).
    pub fn root(&self) -> B256 {
        if self.deal_ids.is_empty() {
            B256::ZERO
        } else {
            self.tree.root()
        }
    }

    /// Number of entries (the `leafCount` posted on chain).
    pub fn leaf_count(&self) -> u32 {
        self.deal_ids.len() as u32
    }

    /// The leaf index of `deal_id` and its path (siblings from the leaf up), or
    /// [`CommitmentError::Missing`].
    pub fn path_of(&self, deal_id: u64) -> Result<(u64, Vec<B256>), CommitmentError> {
        let i = self.deal_ids.binary_search(&deal_id).map_err(|_| CommitmentError::Missing(deal_id))?;
        let path = self.tree.path(i as u64).map_err(|_| CommitmentError::Missing(deal_id))?;
        Ok((i as u64, path))
    }
}

/// Siblings in a path of a commitment of `leaf_count` leaves: log2 of the padded count.
pub fn path_len(leaf_count: u32) -> usize {
    (leaf_count.max(1) as u64).next_power_of_two().trailing_zeros() as usize
}

/// Checks that `entry` sits at `index` of the commitment with root `root` and
/// `leaf_count` leaves (what `answerChallenge` checks on chain, plus the index bound).
pub fn verify_entry(root: B256, leaf_count: u32, index: u64, entry: &Entry, path: &[B256]) -> Result<(), CommitmentError> {
    if index >= u64::from(leaf_count) {
        return Err(CommitmentError::Index { index, leaves: leaf_count });
    }
    let expected = path_len(leaf_count);
    if path.len() != expected {
        return Err(CommitmentError::PathLength { got: path.len(), expected, leaves: leaf_count });
    }
    if root_from_path(entry.leaf(), index, path) == root {
        Ok(())
    } else {
        Err(CommitmentError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merkle::node;

    fn entry(deal_id: u64, byte: u8) -> Entry {
        Entry { deal_id, epoch: deal_id + 3, version: 2, response_hash: B256::repeat_byte(byte) }
    }

    /// The leaf is keccak of the Solidity packed encoding, written out independently.
    #[test]
    fn leaf_is_the_packed_encoding() {
        let rh = B256::repeat_byte(0xab);
        let mut packed = vec![0x04u8];
        packed.extend_from_slice(&alloy_primitives::U256::from(7u64).to_be_bytes::<32>());
        packed.extend_from_slice(&9u64.to_be_bytes());
        packed.extend_from_slice(&2u64.to_be_bytes());
        packed.extend_from_slice(rh.as_slice());
        assert_eq!(packed.len(), 81);
        assert_eq!(leaf(7, 9, 2, rh), keccak256(&packed));
    }

    #[test]
    fn response_hash_salts_every_block_with_the_seed() {
        let s = B256::repeat_byte(1);
        let blocks = [vec![2u8; 40], vec![3u8; 40]];
        let mut cat = s.to_vec();
        cat.extend_from_slice(&blocks[0]);
        cat.extend_from_slice(&blocks[1]);
        assert_eq!(response_hash(s, &blocks), keccak256(&cat));
        assert_ne!(response_hash(B256::repeat_byte(9), &blocks), response_hash(s, &blocks));
    }

    /// Roots against a tree built by hand, for 0..9 entries; every path verifies and a
    /// changed entry, index or root does not.
    #[test]
    fn roots_and_paths_match_a_hand_built_tree() {
        assert_eq!(Commitment::new(&[]).unwrap().root(), B256::ZERO);
        for n in 1..=9u64 {
            let entries: Vec<Entry> = (0..n).map(|i| entry(10 * i + 1, i as u8)).collect();
            let c = Commitment::new(&entries).unwrap();
            let mut layer: Vec<B256> = entries.iter().map(Entry::leaf).collect();
            layer.resize(layer.len().next_power_of_two(), B256::ZERO);
            while layer.len() > 1 {
                layer = layer.chunks(2).map(|p| node(&p[0], &p[1])).collect();
            }
            assert_eq!(c.root(), layer[0], "{n} entries");
            assert_eq!(c.leaf_count() as u64, n);
            for e in &entries {
                let (i, path) = c.path_of(e.deal_id).unwrap();
                verify_entry(c.root(), c.leaf_count(), i, e, &path).unwrap();
                let mut wrong = *e;
                wrong.version += 1;
                assert_eq!(verify_entry(c.root(), c.leaf_count(), i, &wrong, &path), Err(CommitmentError::Mismatch));
                assert!(verify_entry(c.root(), c.leaf_count(), n, e, &path).is_err());
            }
            assert_eq!(c.path_of(5).unwrap_err(), CommitmentError::Missing(5));
        }
    }

    #[test]
    fn unsorted_or_duplicate_entries_are_refused() {
        assert_eq!(Commitment::new(&[entry(3, 0), entry(2, 0)]).unwrap_err(), CommitmentError::Unsorted(2));
        assert_eq!(Commitment::new(&[entry(3, 0), entry(3, 1)]).unwrap_err(), CommitmentError::Unsorted(3));
    }
}
