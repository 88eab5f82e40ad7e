//! Proving, block by block, what a damaged provider still serves of a run against
//! the run's root (DESIGN §6, extraction; issue 10 finding 2).
//!
//! A provider whose disk is damaged may return some coded blocks and not others, and
//! Merkle paths read from a tree file that may itself be damaged, truncated or gone.
//! Extraction must still use every served block that is provably right. A block is
//! accepted only through a chain of hash equalities from its leaf to the trusted root
//! (a Merkle proof), but the sibling hashes of that proof may come from anywhere:
//!
//! - the *stored* nodes the provider sent (every path element is the stored node at
//!   (height h, index (p ≫ h) ⊕ 1)); at most [`STORED_PER_NODE`] distinct values per
//!   node are kept, so a provider sending conflicting paths cannot blow up the work;
//! - nodes *computed* bottom-up from the served blocks' leaves and from the stored
//!   nodes below.
//!
//! Each node gets up to [`CANDIDATES`] candidate values: first the one recomputed
//! from the first candidates of its children (at a leaf, the served block's leaf),
//! then the stored ones, then other combinations of the children's candidates. Then, from the root down, a node whose value is trusted accepts the one pair
//! of child candidates that hashes to it (collision resistance: only the true pair
//! can), which makes both children trusted. A served block is proven if its leaf equals
//! its trusted leaf. This is sound whatever the provider sends (every acceptance is a
//! keccak chain to the root), and it recovers every node for which the stored value
//! or the value recomputed from below is intact: all blocks of a run with intact blocks
//! and a damaged tree, all intact blocks of a run with damaged or missing blocks and an
//! intact tree, and mixtures of both in different subtrees.
//!
//! Cost: one keccak per node of the run tree when nothing is damaged (2·size − 1);
//! at most [`CANDIDATES`]² per node otherwise.

use crate::merkle::{node, MerkleError};
use alloy_primitives::B256;

/// Most candidate values kept per tree node.
pub const CANDIDATES: usize = 4;

/// Most distinct stored values (from the provider's paths) kept per tree node.
pub const STORED_PER_NODE: usize = 2;

/// What a provider served for one position of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Served {
    /// The run leaf of the block served (`merkle::run_leaf(p, block_root(block))`),
    /// `None` if no usable block was served.
    pub leaf: Option<B256>,
    /// The path the provider sent (siblings from the leaf up); may be shorter than
    /// the tree's depth (a damaged tree) or empty, and may be wrong.
    pub path: Vec<B256>,
}

/// Up to [`CANDIDATES`] distinct values of one node.
#[derive(Debug, Clone, Copy, Default)]
struct Candidates {
    values: [B256; CANDIDATES],
    len: u8,
}

impl Candidates {
    fn as_slice(&self) -> &[B256] {
        &self.values[..self.len as usize]
    }

    fn is_full(&self) -> bool {
        self.len as usize == CANDIDATES
    }

    /// Adds `v` if new and there is room (`limit` of them at most).
    fn push(&mut self, v: B256, limit: usize) {
        let n = self.len as usize;
        if n < limit.min(CANDIDATES) && !self.as_slice().contains(&v) {
            self.values[n] = v;
            self.len += 1;
        }
    }
}

/// For a run tree of `served.len()` leaves (a power of two) with root `root`, which
/// served blocks are proven: `proven[p]` is true iff `served[p].leaf` is the leaf at
/// position p of the tree with root `root` (module docs).
///
/// Errors: [`MerkleError::LeafCount`] if `served` is empty or not a power of two long.
pub fn prove_served(root: &B256, served: &[Served]) -> Result<Vec<bool>, MerkleError> {
    let size = served.len();
    if size == 0 || !size.is_power_of_two() {
        return Err(MerkleError::LeafCount(size));
    }
    let depth = size.trailing_zeros() as usize;
    // stored[h][i]: distinct values the paths gave for node i at height h.
    let mut stored: Vec<Vec<Candidates>> = (0..depth).map(|h| vec![Candidates::default(); size >> h]).collect();
    for (p, s) in served.iter().enumerate() {
        for (h, sibling) in s.path.iter().enumerate().take(depth) {
            stored[h][(p >> h) ^ 1].push(*sibling, STORED_PER_NODE);
        }
    }
    // layers[h][i]: candidates of node i at height h (h = 0: leaves; h = depth: root),
    // in the order: the value recomputed from the first candidates below (at a leaf,
    // the served block's), the stored values, then other combinations. The first is
    // right wherever every block below is intact; a stored one wherever the tree is.
    let mut layers: Vec<Vec<Candidates>> = Vec::with_capacity(depth + 1);
    let mut leaves = vec![Candidates::default(); size];
    for (p, (s, c)) in served.iter().zip(leaves.iter_mut()).enumerate() {
        if let Some(leaf) = s.leaf {
            c.push(leaf, CANDIDATES);
        }
        if let Some(st) = stored.first() {
            for v in st[p].as_slice() {
                c.push(*v, CANDIDATES);
            }
        }
    }
    layers.push(leaves);
    for h in 1..=depth {
        let below = &layers[h - 1];
        let mut layer = vec![Candidates::default(); size >> h];
        for (i, cand) in layer.iter_mut().enumerate() {
            let (l, r) = (below[2 * i].as_slice(), below[2 * i + 1].as_slice());
            if let (Some(a), Some(b)) = (l.first(), r.first()) {
                cand.push(node(a, b), CANDIDATES);
            }
            if let Some(st) = stored.get(h) {
                for v in st[i].as_slice() {
                    cand.push(*v, CANDIDATES);
                }
            }
            'pairs: for (x, a) in l.iter().enumerate() {
                for (y, b) in r.iter().enumerate() {
                    if cand.is_full() {
                        break 'pairs;
                    }
                    if x + y > 0 {
                        cand.push(node(a, b), CANDIDATES);
                    }
                }
            }
        }
        layers.push(layer);
    }
    // Top-down: trust flows from the root to every pair of children that hashes to a
    // trusted parent.
    let mut trusted: Vec<Option<B256>> = vec![Some(*root)];
    for h in (1..=depth).rev() {
        let below = &layers[h - 1];
        let mut next = vec![None; size >> (h - 1)];
        for (i, t) in trusted.iter().enumerate() {
            let Some(t) = t else { continue };
            'find: for a in below[2 * i].as_slice() {
                for b in below[2 * i + 1].as_slice() {
                    if node(a, b) == *t {
                        next[2 * i] = Some(*a);
                        next[2 * i + 1] = Some(*b);
                        break 'find;
                    }
                }
            }
        }
        trusted = next;
    }
    Ok(served.iter().zip(&trusted).map(|(s, t)| s.leaf.is_some() && s.leaf == *t).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::merkle::MerkleTree;

    fn leaves(n: usize) -> Vec<B256> {
        (0..n).map(|i| B256::repeat_byte(i as u8 + 1)).collect()
    }

    fn honest(tree: &MerkleTree, leaves: &[B256]) -> Vec<Served> {
        leaves
            .iter()
            .enumerate()
            .map(|(p, l)| Served { leaf: Some(*l), path: tree.path(p as u64).unwrap() })
            .collect()
    }

    #[test]
    fn single_leaf_and_bad_sizes() {
        let l = B256::repeat_byte(9);
        assert_eq!(prove_served(&l, &[Served { leaf: Some(l), path: vec![] }]).unwrap(), vec![true]);
        assert_eq!(prove_served(&l, &[Served { leaf: Some(B256::ZERO), path: vec![] }]).unwrap(), vec![false]);
        assert!(prove_served(&l, &[]).is_err());
        assert!(prove_served(&l, &vec![Served::default(); 3]).is_err());
    }

    #[test]
    fn intact_run_is_proven_and_a_wrong_root_proves_nothing() {
        let ls = leaves(16);
        let tree = MerkleTree::new(ls.clone()).unwrap();
        let served = honest(&tree, &ls);
        assert!(prove_served(&tree.root(), &served).unwrap().iter().all(|x| *x));
        assert!(prove_served(&B256::ZERO, &served).unwrap().iter().all(|x| !*x));
    }

    #[test]
    fn no_paths_at_all_still_proves_a_complete_run() {
        let ls = leaves(8);
        let tree = MerkleTree::new(ls.clone()).unwrap();
        let served: Vec<Served> = ls.iter().map(|l| Served { leaf: Some(*l), path: vec![] }).collect();
        assert!(prove_served(&tree.root(), &served).unwrap().iter().all(|x| *x));
        // One block missing and no paths: the root cannot be reached, nothing is proven.
        let mut s2 = served.clone();
        s2[3].leaf = None;
        assert!(prove_served(&tree.root(), &s2).unwrap().iter().all(|x| !*x));
    }
}
