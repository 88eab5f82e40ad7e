//! keccak256 Merkle trees (ENCODING.md §2–4): block roots over 128-byte chunks, run
//! trees over coded blocks, and the U tree.
//!
//! All trees are complete binary trees over a power-of-two number of leaves. Leaves
//! and nodes are domain-separated by a leading byte (0x00 chunk leaf, 0x01 node,
//! 0x02 run leaf, 0x03 U leaf). A path lists the siblings from the leaf up; bit i of
//! the leaf index says whether the node at height i is a right child.
//!
//! Blocks are independent, so the chunk trees of many blocks ([`block_roots`],
//! [`run_tree`], [`u_tree`]) and the wide layers of a large tree are hashed on
//! rayon's pool; the hashes do not depend on the split. Every hash here has a
//! one-block input (at most 129 bytes), so independent hashes (a layer of a chunk
//! tree, the same layer of up to [`LANE_GROUP`] blocks' chunk trees, a wide layer of
//! a large tree) are hashed several at a time in SIMD lanes (`dpor_keccak`: eight with
//! AVX-512, four with AVX2, the same bits as one at a time).

use alloy_primitives::{keccak256, B256};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use thiserror::Error;

/// Bytes of one chunk of a block (ENCODING.md §2): a chunk leaf's input (129 bytes)
/// fits one keccak-f permutation (rate 136 bytes).
pub const CHUNK_BYTES: usize = 128;

/// Domain byte of a chunk leaf.
pub const TAG_CHUNK: u8 = 0x00;
/// Domain byte of an inner node.
pub const TAG_NODE: u8 = 0x01;
/// Domain byte of a run (C or level) leaf.
pub const TAG_RUN_LEAF: u8 = 0x02;
/// Domain byte of a U leaf.
pub const TAG_U_LEAF: u8 = 0x03;

/// Errors of Merkle path verification and tree building.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MerkleError {
    /// A leaf index is outside the tree.
    #[error("leaf {index} is outside a tree of {leaves} leaves")]
    Index {
        /// The index.
        index: u64,
        /// Leaves in the tree.
        leaves: u64,
    },
    /// A path has the wrong number of siblings.
    #[error("path has {got} siblings, the tree has depth {expected}")]
    PathLength {
        /// Siblings given.
        got: usize,
        /// The depth.
        expected: u32,
    },
    /// The path does not lead to the root.
    #[error("Merkle path does not match the root")]
    Mismatch,
    /// A tree needs a power-of-two number of leaves, at least one.
    #[error("{0} leaves is not a power of two")]
    LeafCount(usize),
}

/// An inner node: `keccak256(0x01 ‖ left ‖ right)`.
pub fn node(left: &B256, right: &B256) -> B256 {
    keccak256(node_input(left, right))
}

/// A chunk leaf: `keccak256(0x00 ‖ chunk)`, the chunk zero-padded to 128 bytes.
pub fn chunk_leaf(chunk: &[u8]) -> B256 {
    keccak256(chunk_leaf_input(chunk))
}

/// A run leaf: `keccak256(0x02 ‖ u64be(position) ‖ blockRoot)`.
pub fn run_leaf(position: u64, block_root: &B256) -> B256 {
    let mut buf = [0u8; 41];
    buf[0] = TAG_RUN_LEAF;
    buf[1..9].copy_from_slice(&position.to_be_bytes());
    buf[9..].copy_from_slice(block_root.as_slice());
    keccak256(buf)
}

/// A U leaf: `keccak256(0x03 ‖ u64be(index) ‖ blockRoot ‖ σ̃)`, σ̃ the 32-byte
/// encrypted checksum.
pub fn u_leaf(index: u64, block_root: &B256, sealed_checksum: &[u8; 32]) -> B256 {
    let mut buf = [0u8; 73];
    buf[0] = TAG_U_LEAF;
    buf[1..9].copy_from_slice(&index.to_be_bytes());
    buf[9..41].copy_from_slice(block_root.as_slice());
    buf[41..].copy_from_slice(sealed_checksum);
    keccak256(buf)
}

/// Chunks of a block of `bytes` bytes: ⌈bytes/128⌉ (at least 1).
pub fn chunk_count(bytes: usize) -> usize {
    bytes.div_ceil(CHUNK_BYTES).max(1)
}

/// Depth of a block's chunk tree: ⌈log2 chunks⌉.
pub fn chunk_depth(bytes: usize) -> u32 {
    chunk_count(bytes).next_power_of_two().trailing_zeros()
}

/// A complete binary tree kept whole: `layers[0]` the leaves, the last layer the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MerkleTree {
    layers: Vec<Vec<B256>>,
}

impl MerkleTree {
    /// The tree over `leaves` (a power of two, at least 1).
    pub fn new(leaves: Vec<B256>) -> Result<Self, MerkleError> {
        if leaves.is_empty() || !leaves.len().is_power_of_two() {
            return Err(MerkleError::LeafCount(leaves.len()));
        }
        let mut layers = vec![leaves];
        while let Some(last) = layers.last() {
            if last.len() == 1 {
                break;
            }
            let next = parent_layer(last);
            layers.push(next);
        }
        Ok(Self { layers })
    }

    /// The tree over leaves padded with `B256::ZERO` to the next power of two (no
    /// leaves: one zero leaf, root `B256::ZERO`). Nodes whose subtree is all padding are
    /// taken from a table instead of being hashed.
    pub fn padded(mut leaves: Vec<B256>) -> Self {
        let n = leaves.len().max(1).next_power_of_two();
        let mut real = leaves.len();
        leaves.resize(n, B256::ZERO);
        let mut height = 0;
        let mut layers = vec![leaves];
        while let Some(last) = layers.last() {
            if last.len() == 1 {
                break;
            }
            let next_zero = zero_root(height + 1);
            let next: Vec<B256> = last
                .chunks_exact(2)
                .enumerate()
                .map(|(i, p)| if 2 * i >= real { next_zero } else { node(&p[0], &p[1]) })
                .collect();
            real = real.div_ceil(2);
            height += 1;
            layers.push(next);
        }
        Self { layers }
    }

    /// Every layer, leaves first, the root's layer (one node) last.
    pub fn layers(&self) -> &[Vec<B256>] {
        &self.layers
    }

    /// The root (the single node of the last layer).
    pub fn root(&self) -> B256 {
        self.layers.last().and_then(|l| l.first()).copied().unwrap_or(B256::ZERO)
    }

    /// Number of leaves.
    pub fn len(&self) -> u64 {
        self.layers[0].len() as u64
    }

    /// Always false: a tree has at least one leaf.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The depth (log2 of the leaf count).
    pub fn depth(&self) -> u32 {
        (self.layers.len() - 1) as u32
    }

    /// Leaf `index`.
    pub fn leaf(&self, index: u64) -> Option<B256> {
        self.layers[0].get(index as usize).copied()
    }

    /// The path of leaf `index` (siblings from the leaf up).
    pub fn path(&self, index: u64) -> Result<Vec<B256>, MerkleError> {
        if index >= self.len() {
            return Err(MerkleError::Index { index, leaves: self.len() });
        }
        let mut i = index as usize;
        let mut out = Vec::with_capacity(self.layers.len() - 1);
        for layer in &self.layers[..self.layers.len() - 1] {
            out.push(layer[i ^ 1]);
            i >>= 1;
        }
        Ok(out)
    }

    /// Replaces several leaves and updates the nodes above them, each changed node
    /// hashed once (shared ancestors too), layer by layer in SIMD lanes: what a batch
    /// of writes does to the U tree. The same tree as [`MerkleTree::set_leaf`] on each
    /// `(index, leaf)` in order (a later entry for an index wins).
    ///
    /// Errors: an index out of range (the tree is then unchanged).
    pub fn set_leaves(&mut self, leaves: &[(u64, B256)]) -> Result<(), MerkleError> {
        if let Some((index, _)) = leaves.iter().find(|(i, _)| *i >= self.len()) {
            return Err(MerkleError::Index { index: *index, leaves: self.len() });
        }
        let mut changed: Vec<usize> = Vec::with_capacity(leaves.len());
        for (index, leaf) in leaves {
            self.layers[0][*index as usize] = *leaf;
            changed.push(*index as usize);
        }
        for h in 1..self.layers.len() {
            let mut parents: Vec<usize> = changed.iter().map(|i| i >> 1).collect();
            parents.sort_unstable();
            parents.dedup();
            let below = &self.layers[h - 1];
            let hashes = hash_nodes(parents.iter().map(|p| (&below[2 * p], &below[2 * p + 1])));
            for (p, hash) in parents.iter().zip(hashes) {
                self.layers[h][*p] = hash;
            }
            changed = parents;
        }
        Ok(())
    }

    /// Replaces leaf `index` and updates the nodes above it (O(depth)).
    pub fn set_leaf(&mut self, index: u64, leaf: B256) -> Result<(), MerkleError> {
        if index >= self.len() {
            return Err(MerkleError::Index { index, leaves: self.len() });
        }
        let mut i = index as usize;
        self.layers[0][i] = leaf;
        for h in 1..self.layers.len() {
            let (lo, hi) = self.layers.split_at_mut(h);
            let below = &lo[h - 1];
            let pair = i & !1;
            i >>= 1;
            hi[0][i] = node(&below[pair], &below[pair + 1]);
        }
        Ok(())
    }
}

/// Layers at least this wide are hashed on rayon's pool.
const PAR_MIN_NODES: usize = 1 << 12;

/// The layer above `layer` (an even number of nodes): `node(l, r)` of each pair, in
/// order, hashed in lanes (and on rayon's pool if the layer is wide).
fn parent_layer(layer: &[B256]) -> Vec<B256> {
    let pairs = |part: &[B256]| hash_nodes(part.chunks_exact(2).map(|p| (&p[0], &p[1])));
    if layer.len() >= PAR_MIN_NODES {
        layer.par_chunks(PAR_MIN_NODES / 4).flat_map_iter(pairs).collect()
    } else {
        pairs(layer)
    }
}

/// The input of [`node`]: `0x01 ‖ left ‖ right`.
fn node_input(left: &B256, right: &B256) -> [u8; 65] {
    let mut buf = [0u8; 65];
    buf[0] = TAG_NODE;
    buf[1..33].copy_from_slice(left.as_slice());
    buf[33..].copy_from_slice(right.as_slice());
    buf
}

/// The input of [`chunk_leaf`]: `0x00 ‖ chunk`, the chunk zero-padded to 128 bytes.
fn chunk_leaf_input(chunk: &[u8]) -> [u8; 1 + CHUNK_BYTES] {
    let mut buf = [0u8; 1 + CHUNK_BYTES];
    buf[0] = TAG_CHUNK;
    let n = chunk.len().min(CHUNK_BYTES);
    buf[1..1 + n].copy_from_slice(&chunk[..n]);
    buf
}

/// keccak256 of each input, in order, in SIMD lanes (`dpor_keccak::keccak256_many`).
fn hash_all<const L: usize>(inputs: &[[u8; L]]) -> Vec<B256> {
    let refs: Vec<&[u8]> = inputs.iter().map(|i| i.as_slice()).collect();
    let mut out = vec![[0u8; 32]; refs.len()];
    dpor_keccak::keccak256_many(&refs, &mut out);
    out.into_iter().map(B256::from).collect()
}

/// Chunk trees hashed by this process so far, by block length in bytes (what
/// [`block_roots`], [`block_root`], [`run_tree`] and [`u_tree`] hashed): the counters
/// the end-to-end bench reads before and after its batched writes to print the coded
/// and data blocks hashed per write (issue 23). One lock per group of up to
/// [`LANE_GROUP`] blocks.
pub fn chunk_tree_counts() -> BTreeMap<usize, u64> {
    chunk_tree_counter().lock().map(|m| m.clone()).unwrap_or_else(|e| e.into_inner().clone())
}

fn chunk_tree_counter() -> &'static Mutex<BTreeMap<usize, u64>> {
    static COUNTS: OnceLock<Mutex<BTreeMap<usize, u64>>> = OnceLock::new();
    COUNTS.get_or_init(Default::default)
}

fn count_chunk_trees(lens: impl Iterator<Item = usize>) {
    let mut m = chunk_tree_counter().lock().unwrap_or_else(|e| e.into_inner());
    for len in lens {
        *m.entry(len).or_insert(0) += 1;
    }
}

/// Blocks whose chunk trees are hashed together, layer by layer, so that every
/// layer fills the SIMD lanes ([`block_roots`]).
pub const LANE_GROUP: usize = 8;

/// The block roots of many blocks (ENCODING.md §2), in order: groups of
/// [`LANE_GROUP`] blocks on rayon's pool, each group's chunk trees hashed together in
/// lanes.
pub fn block_roots<B: AsRef<[u8]> + Sync>(blocks: &[B]) -> Vec<B256> {
    if blocks.len() <= LANE_GROUP {
        // One group: on this thread (handing it to the pool costs more than it saves).
        return block_roots_together(blocks);
    }
    blocks.par_chunks(LANE_GROUP).flat_map_iter(block_roots_together).collect()
}

/// The block roots of `blocks` (any lengths) on the calling thread, their chunk trees
/// hashed layer by layer together: each layer's hashes of all blocks go to the lanes
/// at once. Nodes whose subtree is all padding come from [`zero_root`]'s table.
pub fn block_roots_together<B: AsRef<[u8]>>(blocks: &[B]) -> Vec<B256> {
    count_chunk_trees(blocks.iter().map(|b| b.as_ref().len()));
    // The chunks themselves: each leaf's input `0x00 ‖ chunk` (zero-padded to 128
    // bytes) is built by the keccak lanes as they load the chunk, not copied first.
    let mut chunks: Vec<&[u8]> = Vec::new();
    let mut counts = Vec::with_capacity(blocks.len());
    for b in blocks {
        let b = b.as_ref();
        if b.is_empty() {
            chunks.push(&[]);
        } else {
            chunks.extend(b.chunks(CHUNK_BYTES));
        }
        counts.push(chunk_count(b.len()));
    }
    let mut hashed = vec![[0u8; 32]; chunks.len()];
    dpor_keccak::keccak256_many_prefixed(TAG_CHUNK, 1 + CHUNK_BYTES, &chunks, &mut hashed);
    let leaves: Vec<B256> = hashed.into_iter().map(B256::from).collect();
    let mut layers: Vec<Vec<B256>> = Vec::with_capacity(blocks.len());
    let mut at = 0;
    for c in &counts {
        layers.push(leaves[at..at + c].to_vec());
        at += c;
    }
    let mut height = 0;
    while layers.iter().any(|l| l.len() > 1) {
        // `len` real nodes at `height`; an odd last one pairs with an all-padding subtree.
        let mut inputs = Vec::new();
        for l in layers.iter().filter(|l| l.len() > 1) {
            for p in l.chunks(2) {
                inputs.push(match p {
                    [a, b] => node_input(a, b),
                    [a] => node_input(a, &zero_root(height)),
                    _ => unreachable!("chunks of two"),
                });
            }
        }
        let mut hashed = hash_all(&inputs).into_iter();
        for l in layers.iter_mut().filter(|l| l.len() > 1) {
            let next = l.len().div_ceil(2);
            *l = hashed.by_ref().take(next).collect();
        }
        height += 1;
    }
    layers.into_iter().map(|l| l.first().copied().unwrap_or(B256::ZERO)).collect()
}

/// The root a path leads to from `leaf` at `index` (no check of the path's length).
pub fn root_from_path(leaf: B256, index: u64, path: &[B256]) -> B256 {
    let mut acc = leaf;
    for (h, sib) in path.iter().enumerate() {
        acc = if (index >> h) & 1 == 1 { node(sib, &acc) } else { node(&acc, sib) };
    }
    acc
}

/// `node(l, r)` of each pair, in order, hashed in SIMD lanes.
pub fn nodes_of_pairs(pairs: &[(B256, B256)]) -> Vec<B256> {
    hash_nodes(pairs.iter().map(|(l, r)| (l, r)))
}

/// [`node`] of each `(left, right)`, in order, hashed in SIMD lanes: what every
/// layer-at-a-time update here shares.
fn hash_nodes<'a>(pairs: impl Iterator<Item = (&'a B256, &'a B256)>) -> Vec<B256> {
    let inputs: Vec<[u8; 65]> = pairs.map(|(l, r)| node_input(l, r)).collect();
    hash_all(&inputs)
}

/// The roots many paths lead to ([`root_from_path`] of each `(leaf, index, path)`),
/// their hashes taken layer by layer in SIMD lanes. Paths may have different lengths.
pub fn roots_from_paths(items: &[(B256, u64, &[B256])]) -> Vec<B256> {
    let mut acc: Vec<B256> = items.iter().map(|(leaf, _, _)| *leaf).collect();
    let depth = items.iter().map(|(_, _, p)| p.len()).max().unwrap_or(0);
    for h in 0..depth {
        let live: Vec<usize> = (0..items.len()).filter(|k| items[*k].2.len() > h).collect();
        let hashes = hash_nodes(live.iter().map(|&k| {
            let (_, index, path) = items[k];
            if (index >> h) & 1 == 1 { (&path[h], &acc[k]) } else { (&acc[k], &path[h]) }
        }));
        for (k, hash) in live.into_iter().zip(hashes) {
            acc[k] = hash;
        }
    }
    acc
}

/// Checks that `leaf` sits at `index` of a tree of depth `depth` with root `root`.
///
/// Errors: index out of range, a path of the wrong length, or a mismatch.
pub fn verify_path(root: &B256, depth: u32, index: u64, leaf: B256, path: &[B256]) -> Result<(), MerkleError> {
    if depth >= 64 || index >> depth != 0 {
        return Err(MerkleError::Index { index, leaves: 1u64.checked_shl(depth).unwrap_or(u64::MAX) });
    }
    if path.len() != depth as usize {
        return Err(MerkleError::PathLength { got: path.len(), expected: depth });
    }
    if root_from_path(leaf, index, path) == *root {
        Ok(())
    } else {
        Err(MerkleError::Mismatch)
    }
}

/// The chunk tree of a block (its chunk leaves padded with zero leaves).
pub fn chunk_tree(block: &[u8]) -> MerkleTree {
    let leaves: Vec<B256> = if block.is_empty() {
        vec![chunk_leaf(&[])]
    } else {
        block.chunks(CHUNK_BYTES).map(chunk_leaf).collect()
    };
    MerkleTree::padded(leaves)
}

/// The block root of a block's bytes (ENCODING.md §2): the root of [`chunk_tree`],
/// computed without keeping the tree and without hashing all-padding subtrees (their
/// roots come from a table): 77 keccak-f permutations for a 4696-byte coded block
/// instead of 83, each layer's in SIMD lanes. Many blocks: [`block_roots`] (faster:
/// the lanes stay full).
pub fn block_root(block: &[u8]) -> B256 {
    block_roots_together(&[block]).first().copied().unwrap_or(B256::ZERO)
}

/// [`block_root`] one hash at a time with `alloy_primitives::keccak256`: the
/// reference the lanes are tested and benchmarked against.
pub fn block_root_scalar(block: &[u8]) -> B256 {
    let mut layer: Vec<B256> = if block.is_empty() {
        vec![chunk_leaf(&[])]
    } else {
        block.chunks(CHUNK_BYTES).map(chunk_leaf).collect()
    };
    let depth = layer.len().next_power_of_two().trailing_zeros();
    let mut len = layer.len();
    for height in 0..depth {
        // `len` real nodes at `height`; an odd last one pairs with an all-padding subtree.
        for i in 0..len / 2 {
            layer[i] = node(&layer[2 * i], &layer[2 * i + 1]);
        }
        if len % 2 == 1 {
            layer[len / 2] = node(&layer[len - 1], &zero_root(height));
        }
        len = len.div_ceil(2);
    }
    layer[0]
}

/// Heights of all-padding subtrees kept in [`zero_root`]'s table (blocks of up to
/// 2^40 chunks).
const ZERO_ROOTS: usize = 41;

/// The root of an all-padding subtree of `height` (0: a padding leaf, `B256::ZERO`;
/// h + 1: `node(z_h, z_h)`), from a table computed once.
fn zero_root(height: u32) -> B256 {
    static TABLE: std::sync::OnceLock<[B256; ZERO_ROOTS]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [B256::ZERO; ZERO_ROOTS];
        for h in 1..ZERO_ROOTS {
            t[h] = node(&t[h - 1], &t[h - 1]);
        }
        t
    });
    match table.get(height as usize) {
        Some(z) => *z,
        None => {
            let last = table[ZERO_ROOTS - 1];
            (ZERO_ROOTS as u32 - 1..height).fold(last, |z, _| node(&z, &z))
        }
    }
}

/// The 128-byte chunk `index` of a block (zero-padded) with its chunk path.
pub fn chunk_proof(block: &[u8], index: u64) -> Result<([u8; CHUNK_BYTES], Vec<B256>), MerkleError> {
    let count = chunk_count(block.len()) as u64;
    if index >= count {
        return Err(MerkleError::Index { index, leaves: count });
    }
    let tree = chunk_tree(block);
    let mut chunk = [0u8; CHUNK_BYTES];
    let start = index as usize * CHUNK_BYTES;
    let end = (start + CHUNK_BYTES).min(block.len());
    chunk[..end - start].copy_from_slice(&block[start..end]);
    Ok((chunk, tree.path(index)?))
}

/// Checks a chunk against a block root, for a block of `block_bytes` bytes.
pub fn verify_chunk(
    block_root: &B256,
    block_bytes: usize,
    index: u64,
    chunk: &[u8; CHUNK_BYTES],
    path: &[B256],
) -> Result<(), MerkleError> {
    let count = chunk_count(block_bytes) as u64;
    if index >= count {
        return Err(MerkleError::Index { index, leaves: count });
    }
    verify_path(block_root, chunk_depth(block_bytes), index, chunk_leaf(chunk), path)
}

/// The tree of a run from its coded blocks' bytes (one per position).
pub fn run_tree<B: AsRef<[u8]> + Sync>(coded_blocks: &[B]) -> Result<MerkleTree, MerkleError> {
    MerkleTree::new(run_leaves(&block_roots(coded_blocks)))
}

/// The run leaves of blocks at positions 0.. with these block roots, hashed in lanes
/// (on rayon's pool if there are many).
pub fn run_leaves(block_roots: &[B256]) -> Vec<B256> {
    leaves_in_lanes(block_roots.len(), |p| {
        let mut buf = [0u8; 41];
        buf[0] = TAG_RUN_LEAF;
        buf[1..9].copy_from_slice(&(p as u64).to_be_bytes());
        buf[9..].copy_from_slice(block_roots[p].as_slice());
        buf
    })
}

/// Leaves `0..count`, leaf `i` = keccak256(`input(i)`), hashed in lanes, in parts on
/// rayon's pool when there are many.
fn leaves_in_lanes<const L: usize>(count: usize, input: impl Fn(usize) -> [u8; L] + Sync) -> Vec<B256> {
    let part = PAR_MIN_NODES / 4;
    let hash_part = |start: usize| -> Vec<B256> {
        let inputs: Vec<[u8; L]> = (start..(start + part).min(count)).map(&input).collect();
        hash_all(&inputs)
    };
    if count >= PAR_MIN_NODES {
        (0..count.div_ceil(part)).into_par_iter().flat_map_iter(|k| hash_part(k * part)).collect()
    } else {
        (0..count.div_ceil(part)).flat_map(|k| hash_part(k * part)).collect()
    }
}

/// The U tree of `blocks` with their encrypted checksums σ̃ (ENCODING.md §4).
///
/// Errors: lengths differ, or the count is not a power of two.
pub fn u_tree<B: AsRef<[u8]> + Sync>(blocks: &[B], sealed: &[[u8; 32]]) -> Result<MerkleTree, MerkleError> {
    if blocks.len() != sealed.len() {
        return Err(MerkleError::LeafCount(sealed.len()));
    }
    u_tree_of_roots(&block_roots(blocks), sealed)
}

/// The U tree from the blocks' roots ([`block_roots`]) and their σ̃: [`u_tree`] when
/// the block roots were hashed earlier (an upload hashes them beside its requests).
///
/// Errors: lengths differ, or the count is not a power of two.
pub fn u_tree_of_roots(roots: &[B256], sealed: &[[u8; 32]]) -> Result<MerkleTree, MerkleError> {
    if roots.len() != sealed.len() {
        return Err(MerkleError::LeafCount(sealed.len()));
    }
    MerkleTree::new(leaves_in_lanes(roots.len(), |i| {
        let mut buf = [0u8; 73];
        buf[0] = TAG_U_LEAF;
        buf[1..9].copy_from_slice(&(i as u64).to_be_bytes());
        buf[9..41].copy_from_slice(roots[i].as_slice());
        buf[41..].copy_from_slice(&sealed[i]);
        buf
    }))
}

#[cfg(test)]
mod tests {
    /// Block roots in lanes (one block, a group, many groups, blocks of different
    /// lengths side by side) against one hash at a time with alloy's keccak256.
    #[test]
    fn lanes_give_the_scalar_block_roots() {
        let block = |len: usize, seed: usize| -> Vec<u8> { (0..len).map(|i| (i * 31 + seed * 7 + i / 256) as u8).collect() };
        let lens = [0usize, 1, 127, 128, 129, 255, 256, 257, 1024, 4096, 4696, 9000];
        for (k, &len) in lens.iter().enumerate() {
            let b = block(len, k);
            assert_eq!(super::block_root(&b), super::block_root_scalar(&b), "{len} bytes");
        }
        let mixed: Vec<Vec<u8>> = (0..37).map(|i| block(lens[i % lens.len()], i)).collect();
        let want: Vec<_> = mixed.iter().map(|b| super::block_root_scalar(b)).collect();
        assert_eq!(super::block_roots(&mixed), want);
        let same: Vec<Vec<u8>> = (0..21).map(|i| block(4696, i)).collect();
        let want: Vec<_> = same.iter().map(|b| super::block_root_scalar(b)).collect();
        assert_eq!(super::block_roots(&same), want);
    }

    /// Many paths' roots in lanes against one path at a time.
    #[test]
    fn roots_from_paths_equal_root_from_path() {
        let leaves: Vec<super::B256> = (0..32u64).map(|i| super::B256::from(alloy_primitives::U256::from(i * 3 + 1))).collect();
        let t = super::MerkleTree::new(leaves.clone()).unwrap();
        let paths: Vec<Vec<super::B256>> = (0..32u64).map(|i| t.path(i).unwrap()).collect();
        let mut items: Vec<(super::B256, u64, &[super::B256])> =
            (0..32usize).map(|i| (leaves[i], i as u64, paths[i].as_slice())).collect();
        items.push((leaves[3], 3, &paths[3][..2])); // a shorter path
        items.push((super::B256::ZERO, 7, paths[7].as_slice())); // a wrong leaf
        let got = super::roots_from_paths(&items);
        for (k, (leaf, index, path)) in items.iter().enumerate() {
            assert_eq!(got[k], super::root_from_path(*leaf, *index, path), "item {k}");
        }
        assert!(got[..32].iter().all(|r| *r == t.root()));
        assert_ne!(got[33], t.root());
    }

    /// Several leaves set at once (lanes, shared ancestors once) against one at a time.
    #[test]
    fn set_leaves_equals_set_leaf_in_order() {
        let leaves: Vec<super::B256> = (0..64u64).map(|i| super::B256::from(alloy_primitives::U256::from(i + 1))).collect();
        let mut one = super::MerkleTree::new(leaves.clone()).unwrap();
        let mut many = one.clone();
        let updates: Vec<(u64, super::B256)> =
            [5u64, 6, 63, 0, 5, 31, 32, 7].iter().enumerate().map(|(k, i)| (*i, super::B256::repeat_byte(k as u8 + 9))).collect();
        for (i, l) in &updates {
            one.set_leaf(*i, *l).unwrap();
        }
        many.set_leaves(&updates).unwrap();
        assert_eq!(many, one);
        assert_eq!(many.root(), super::MerkleTree::new(many.layers[0].clone()).unwrap().root());
        let before = many.clone();
        assert!(many.set_leaves(&[(3, super::B256::ZERO), (64, super::B256::ZERO)]).is_err());
        assert_eq!(many, before, "an index out of range changes nothing");
        let mut single = super::MerkleTree::new(vec![super::B256::ZERO]).unwrap();
        single.set_leaves(&[(0, super::B256::repeat_byte(1))]).unwrap();
        assert_eq!(single.root(), super::B256::repeat_byte(1));
    }

    /// Run and U trees (leaves in lanes) against leaves one at a time.
    #[test]
    fn lanes_give_the_scalar_run_and_u_leaves() {
        for n in [1usize, 2, 4, 8, 64, super::PAR_MIN_NODES * 2] {
            let blocks: Vec<Vec<u8>> = (0..n).map(|i| vec![(i % 251) as u8; 200]).collect();
            let sealed: Vec<[u8; 32]> = (0..n).map(|i| [(i % 7) as u8; 32]).collect();
            let roots: Vec<_> = blocks.iter().map(|b| super::block_root_scalar(b)).collect();
            let run: Vec<_> = roots.iter().enumerate().map(|(p, r)| super::run_leaf(p as u64, r)).collect();
            assert_eq!(super::run_leaves(&roots), run, "{n} run leaves");
            assert_eq!(super::run_tree(&blocks).unwrap().root(), super::MerkleTree::new(run).unwrap().root());
            let u: Vec<_> = roots.iter().zip(&sealed).enumerate().map(|(i, (r, s))| super::u_leaf(i as u64, r, s)).collect();
            assert_eq!(super::u_tree(&blocks, &sealed).unwrap().root(), super::MerkleTree::new(u).unwrap().root(), "{n} U leaves");
        }
    }

    /// A wide layer (hashed in lanes on rayon's pool) against one node at a time.
    #[test]
    fn lanes_give_the_scalar_parent_layer() {
        for n in [2usize, 6, 8, 18, super::PAR_MIN_NODES, 2 * super::PAR_MIN_NODES + 2] {
            let layer: Vec<super::B256> = (0..n).map(|i| super::B256::from(alloy_primitives::U256::from(i * 977 + 1))).collect();
            let want: Vec<_> = layer.chunks_exact(2).map(|p| super::node(&p[0], &p[1])).collect();
            assert_eq!(super::parent_layer(&layer), want, "{n} nodes");
        }
    }

    use super::*;

    #[test]
    fn chunk_sizes() {
        assert_eq!(chunk_count(4096), 32);
        assert_eq!(chunk_count(4696), 37);
        assert_eq!(chunk_depth(4696), 6);
        assert_eq!(chunk_depth(4096), 5);
        assert_eq!(chunk_depth(1), 0);
    }

    #[test]
    fn padded_tree_equals_plain_tree_over_zero_leaves() {
        for real in 1..=9usize {
            let leaves: Vec<B256> = (0..real as u8).map(|i| keccak256([i])).collect();
            let mut full = leaves.clone();
            full.resize(real.next_power_of_two(), B256::ZERO);
            assert_eq!(MerkleTree::padded(leaves), MerkleTree::new(full).unwrap(), "{real} leaves");
        }
    }

    #[test]
    fn block_root_equals_the_plain_tree_over_zero_padded_chunk_leaves() {
        // Reference: every chunk leaf, zero leaves up to a power of two, a plain full
        // tree (no padding table, no in-place layers).
        for bytes in [0usize, 1, 127, 128, 129, 255, 256, 257, 1000, 4095, 4096, 4097, 4696, 8192, 8193, 20000] {
            let block: Vec<u8> = (0..bytes).map(|i| (i * 31 % 251) as u8).collect();
            let mut leaves: Vec<B256> =
                if block.is_empty() { vec![chunk_leaf(&[])] } else { block.chunks(CHUNK_BYTES).map(chunk_leaf).collect() };
            leaves.resize(leaves.len().next_power_of_two(), B256::ZERO);
            let reference = MerkleTree::new(leaves).unwrap().root();
            assert_eq!(block_root(&block), reference, "{bytes} bytes");
            assert_eq!(chunk_tree(&block).root(), reference, "{bytes} bytes (chunk_tree)");
        }
    }

    #[test]
    fn zero_roots_past_the_table_continue_the_chain() {
        let mut z = B256::ZERO;
        for h in 0..(ZERO_ROOTS as u32 + 3) {
            assert_eq!(zero_root(h), z, "height {h}");
            z = node(&z, &z);
        }
    }

    #[test]
    fn set_leaf_matches_rebuild() {
        let leaves: Vec<B256> = (0..8u8).map(|i| keccak256([i])).collect();
        let mut t = MerkleTree::new(leaves.clone()).unwrap();
        t.set_leaf(5, keccak256([99])).unwrap();
        let mut l2 = leaves;
        l2[5] = keccak256([99]);
        assert_eq!(t, MerkleTree::new(l2).unwrap());
    }
}
