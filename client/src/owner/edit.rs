//! Byte-range edits and sync of the owner's file (issue 11 #5): `dpor write --offset
//! BYTES FILE` and `dpor sync NEWFILE`, as batches of block writes
//! ([`super::batch::write_batch_resizing`], each commit saved with the next batch's
//! intent; their runs are checked at the next checkpoint, like every batch).
//!
//! The file is the first `file_bytes` bytes of U (N blocks of β bytes). Invariant kept
//! by every command here: **the bytes of U past `file_bytes` are zero** (the upload
//! pads with zeros; a sync that shrinks the file writes zeros over what it cuts), so
//! growing the file (a write past its end, a longer sync) never exposes old bytes. The
//! block-level `dpor write INDEX FILE` is the raw interface: it does not change the
//! length.
//!
//! The length changes with the batch that makes it true, through the owner's saved
//! intent, so a crash never leaves a length that disagrees with the blocks: a file
//! that grows gets its new length with the first batch (the bytes beyond the written
//! ones read as zero until their batch lands), one that shrinks with the last (after
//! the zeros). A crash between the batches of one command leaves a file with some of
//! the new blocks, as an interrupted `pwrite` would; running the command again
//! finishes it (a sync writes only what still differs).
//!
//! An edit past the deal's N·β bytes is refused: the deal grows first with `dpor
//! resize` (App. A.3: a new N, the code rebuilt, the deal's price and collateral
//! adjusted on chain; [`super::resize`]).

use super::batch::{max_batch, write_batch_with, BatchReport};
use crate::node_client::{NodeClient, OwnerAuth};
use crate::owner_state::OwnerState;
use crate::progress::Progress;
use alloy_primitives::B256;
use anyhow::{ensure, Context};
use dpor_core::merkle;
use serde::Serialize;
use std::collections::BTreeMap;

/// The block indices `first..=last` that bytes `offset..offset + len` of the file touch,
/// for blocks of `beta` bytes; `None` when `len` is 0.
pub fn touched_blocks(beta: u64, offset: u64, len: u64) -> Option<(u64, u64)> {
    (len > 0 && beta > 0).then(|| (offset / beta, (offset + len - 1) / beta))
}

/// The edge blocks whose old bytes a write of `len` bytes at `offset` keeps, in a file
/// of `old_len` bytes (blocks of `beta` bytes): the first and last touched blocks, when
/// the write covers them only in part and the part it leaves holds file bytes (below
/// `old_len`). Past the file's end everything is zero (module docs), so nothing there
/// needs reading. At most two indices, ascending.
pub fn edges_to_read(beta: u64, old_len: u64, offset: u64, len: u64) -> Vec<u64> {
    let Some((first, last)) = touched_blocks(beta, offset, len) else {
        return Vec::new();
    };
    let end = offset + len;
    let mut out = Vec::new();
    // Kept bytes of the first block: [first·β, offset); of the last: [end, (last+1)·β).
    if offset > first * beta && first * beta < old_len {
        out.push(first);
    }
    if end < (last + 1) * beta && end < old_len && !out.contains(&last) {
        out.push(last);
    }
    out
}

/// The block writes that put `data` at byte `offset` of a file of `old_len` bytes:
/// one (index, β bytes) per touched block, ascending. `edges` holds the old content of
/// the blocks [`edges_to_read`] names (β bytes each); a touched block not in it starts
/// as zeros. Bytes at or past `old_len` that the write does not cover are zeroed (the
/// module's invariant, even if an edge block was read with garbage there).
///
/// Errors: a missing or wrong-sized edge block, or `data` empty.
pub fn patch_blocks(
    beta: usize,
    old_len: u64,
    offset: u64,
    data: &[u8],
    edges: &BTreeMap<u64, Vec<u8>>,
) -> anyhow::Result<Vec<(u64, Vec<u8>)>> {
    let b = beta as u64;
    let (first, last) = touched_blocks(b, offset, data.len() as u64).context("nothing to write: the data is empty")?;
    for i in edges_to_read(b, old_len, offset, data.len() as u64) {
        let e = edges.get(&i).with_context(|| format!("the old content of block {i} is needed"))?;
        ensure!(e.len() == beta, "block {i}: expected {beta} bytes, got {}", e.len());
    }
    let end = offset + data.len() as u64;
    let mut out = Vec::with_capacity((last - first + 1) as usize);
    for i in first..=last {
        let base = i * b;
        let mut block = edges.get(&i).cloned().unwrap_or_else(|| vec![0; beta]);
        block.resize(beta, 0);
        // Past the old end: zero (module invariant).
        if old_len < base + b {
            let from = old_len.saturating_sub(base) as usize;
            block[from..].fill(0);
        }
        // The new bytes.
        let lo = offset.max(base);
        let hi = end.min(base + b);
        block[(lo - base) as usize..(hi - base) as usize].copy_from_slice(&data[(lo - offset) as usize..(hi - offset) as usize]);
        out.push((i, block));
    }
    Ok(out)
}

/// The blocks of U that differ between the node's blocks (their chunk-tree roots
/// `old_roots`, one per block, N in all) and `new_file` laid out as U (zero-padded
/// to N blocks of `beta` bytes): ascending (index, new β-byte block). Blocks past
/// `new_file`'s end are zero blocks, so a file that shrinks has its cut bytes zeroed.
///
/// Errors: `new_file` longer than N·β, `old_roots` not N long.
pub fn sync_writes(beta: usize, old_roots: &[B256], new_file: &[u8]) -> anyhow::Result<Vec<(u64, Vec<u8>)>> {
    let n = old_roots.len();
    let capacity = n as u64 * beta as u64;
    ensure!(
        new_file.len() as u64 <= capacity,
        "the new file has {} bytes; this deal holds at most N·β = {capacity} bytes: grow the deal first with `dpor resize --file NEWFILE`",
        new_file.len()
    );
    let zero = merkle::block_root(&vec![0u8; beta]);
    let mut out = Vec::new();
    // In slices of blocks, so the chunk trees run on every core without one copy of the file.
    const SLICE: usize = 1024;
    let mut start = 0usize;
    while start < n {
        let count = SLICE.min(n - start);
        let blocks: Vec<Vec<u8>> = (start..start + count)
            .map(|i| {
                let lo = (i * beta).min(new_file.len());
                let hi = ((i + 1) * beta).min(new_file.len());
                let mut b = new_file[lo..hi].to_vec();
                b.resize(beta, 0);
                b
            })
            .collect();
        let full: Vec<&Vec<u8>> = blocks.iter().filter(|b| b.iter().any(|&x| x != 0)).collect();
        let mut roots = merkle::block_roots(&full).into_iter();
        for (j, block) in blocks.into_iter().enumerate() {
            let root = if block.iter().any(|&x| x != 0) { roots.next().context("block roots")? } else { zero };
            if root != old_roots[start + j] {
                out.push(((start + j) as u64, block));
            }
        }
        start += count;
    }
    Ok(out)
}

/// The chunk-tree roots of all N blocks of U as the node holds them, checked against
/// the owner's rootU ([`super::flows::verified_u_leaves`]).
///
/// Errors: the node unreachable or refusing; leaves that do not give rootU.
pub async fn verified_block_roots(node: &NodeClient, state: &OwnerState) -> anyhow::Result<Vec<B256>> {
    Ok(super::flows::verified_u_leaves(node, state).await?.into_iter().map(|(root, _)| root).collect())
}

/// What an edit did.
#[derive(Debug, Clone, Serialize)]
pub struct EditReport {
    /// Blocks written.
    pub blocks_written: u64,
    /// Blocks that had to be read first (the edges of a range write).
    pub blocks_read: u64,
    /// The file's length before, bytes.
    pub old_bytes: u64,
    /// The file's length after, bytes.
    pub new_bytes: u64,
    /// The batches' reports.
    pub batches: Vec<BatchReport>,
}

/// Writes `writes` (ascending, β bytes each) as batches and moves the file's length to
/// `new_len` with the first batch if it grows, with the last if it shrinks (module docs).
async fn write_resizing(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    writes: &[(u64, Vec<u8>)],
    new_len: u64,
    bar: Option<&dyn Progress>,
) -> anyhow::Result<Vec<BatchReport>> {
    let old_len = state.file_bytes;
    let per = max_batch(state.block_bytes as usize).max(1);
    let chunks: Vec<&[(u64, Vec<u8>)]> = writes.chunks(per).collect();
    let last = chunks.len().saturating_sub(1);
    let mut reports = Vec::with_capacity(chunks.len());
    // Each commit's save goes with the next batch's intent; the last one is saved here,
    // also after an error.
    let mut result = Ok(());
    for (c, chunk) in chunks.into_iter().enumerate() {
        let resize = (new_len > old_len && c == 0) || (new_len < old_len && c == last);
        match write_batch_with(node, auth, state, chunk, resize.then_some(new_len), true).await {
            Ok(r) => reports.push(r),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
        if let Some(b) = bar {
            b.inc(chunk.len() as u64);
        }
    }
    let saved = state.save_deferred();
    result?;
    saved?;
    if writes.is_empty() && new_len != old_len {
        // Only the length changes (bytes past it are zero, so no block differs): the
        // length is the owner's alone; the digest does not carry it.
        state.file_bytes = new_len;
        state.persist()?;
    }
    Ok(reports)
}

/// `dpor write --offset OFFSET FILE`: writes `data` at byte `offset` of the file,
/// reading (verified) the edge blocks whose other bytes it keeps; the file grows if
/// the write ends past it (the gap reads as zeros).
///
/// Errors: `data` empty; the end past N·β (the deal's capacity); a node answer that
/// fails the owner's checks; the node unreachable (the intent is saved, the next
/// command settles it).
pub async fn write_range(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    offset: u64,
    data: &[u8],
    bar: Option<&dyn Progress>,
) -> anyhow::Result<EditReport> {
    ensure!(state.uploaded, "upload the file first");
    ensure!(!data.is_empty(), "nothing to write: the data is empty");
    let beta = state.block_bytes as u64;
    let capacity = state.num_blocks * beta;
    let end = offset.checked_add(data.len() as u64).context("offset + length overflows")?;
    ensure!(
        end <= capacity,
        "the write ends at byte {end}; this deal holds at most N·β = {capacity} bytes: grow the deal first with `dpor resize --blocks N'` (N' ≥ {} blocks, a power of two)",
        end.div_ceil(beta).next_power_of_two()
    );
    let old_len = state.file_bytes;
    let mut edges = BTreeMap::new();
    for i in edges_to_read(beta, old_len, offset, data.len() as u64) {
        edges.insert(i, super::flows::read(node, state, i).await.with_context(|| format!("reading block {i} (an edge of the range)"))?);
    }
    let writes = patch_blocks(beta as usize, old_len, offset, data, &edges)?;
    if let Some(b) = bar {
        b.set_length(writes.len() as u64);
    }
    let new_len = old_len.max(end);
    let batches = write_resizing(node, auth, state, &writes, new_len, bar).await?;
    Ok(EditReport { blocks_written: writes.len() as u64, blocks_read: edges.len() as u64, old_bytes: old_len, new_bytes: new_len, batches })
}

/// `dpor sync NEWFILE`: makes the file equal to `new_file` by writing only the blocks
/// that differ (found by comparing chunk-tree roots with the node's U leaves, checked
/// against rootU: 64 bytes per block on the wire, no block downloaded), appending or
/// truncating as needed within the deal's N·β bytes.
///
/// Errors: `new_file` longer than N·β; as [`write_range`].
pub async fn sync(
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    state: &mut OwnerState,
    new_file: &[u8],
    bar: Option<&dyn Progress>,
) -> anyhow::Result<EditReport> {
    ensure!(state.uploaded, "upload the file first");
    let old_roots = verified_block_roots(node, state).await?;
    let writes = sync_writes(state.block_bytes as usize, &old_roots, new_file)?;
    if let Some(b) = bar {
        b.set_length(writes.len() as u64);
    }
    let old_len = state.file_bytes;
    let new_len = new_file.len() as u64;
    let batches = write_resizing(node, auth, state, &writes, new_len, bar).await?;
    Ok(EditReport { blocks_written: writes.len() as u64, blocks_read: 0, old_bytes: old_len, new_bytes: new_len, batches })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    /// The reference: the file as a plain byte array, padded with zeros to capacity.
    fn apply(model: &mut [u8], len: &mut u64, offset: u64, data: &[u8]) {
        let end = offset as usize + data.len();
        model[offset as usize..end].copy_from_slice(data);
        *len = (*len).max(end as u64);
    }

    proptest! {
        #[test]
        fn range_writes_match_a_plain_array(
            beta in prop::sample::select(vec![2usize, 8, 64]),
            blocks in 1u64..12,
            ops in prop::collection::vec((0u64..1000, 1usize..200, any::<u8>()), 1..12),
            initial in 0u64..1000,
        ) {
            let cap = blocks * beta as u64;
            let mut len = initial % (cap + 1);
            // U as the node holds it: the file, zeros past its end.
            let mut u: Vec<u8> = (0..cap).map(|i| if i < len { (i * 7 + 3) as u8 } else { 0 }).collect();
            let mut model = u.clone();
            for (off, n, fill) in ops {
                let offset = off % cap;
                let n = n.min((cap - offset) as usize);
                let data: Vec<u8> = (0..n).map(|j| fill.wrapping_add(j as u8)).collect();
                let mut edges = BTreeMap::new();
                for i in edges_to_read(beta as u64, len, offset, n as u64) {
                    edges.insert(i, u[i as usize * beta..(i as usize + 1) * beta].to_vec());
                }
                for (i, block) in patch_blocks(beta, len, offset, &data, &edges).unwrap() {
                    u[i as usize * beta..(i as usize + 1) * beta].copy_from_slice(&block);
                }
                apply(&mut model, &mut len, offset, &data);
                prop_assert_eq!(&u, &model);
            }
        }

        #[test]
        fn sync_writes_exactly_the_blocks_that_differ(
            beta in prop::sample::select(vec![8usize, 64]),
            blocks in 1usize..10,
            old_len in 0usize..700,
            new_len in 0usize..700,
            flips in prop::collection::vec(0usize..700, 0..6),
        ) {
            let cap = blocks * beta;
            let (old_len, new_len) = (old_len % (cap + 1), new_len % (cap + 1));
            let mut u: Vec<u8> = (0..cap).map(|i| if i < old_len { (i % 251 + 1) as u8 } else { 0 }).collect();
            let mut new: Vec<u8> = (0..new_len).map(|i| (i % 251 + 1) as u8).collect();
            for f in flips {
                if new_len > 0 { new[f % new_len] ^= 0x5a; }
            }
            let roots: Vec<B256> = u.chunks(beta).map(merkle::block_root).collect();
            let writes = sync_writes(beta, &roots, &new).unwrap();
            let mut expected = new.clone();
            expected.resize(cap, 0);
            for (i, block) in &writes {
                prop_assert_ne!(&u[*i as usize * beta..(*i as usize + 1) * beta], block.as_slice());
                u[*i as usize * beta..(*i as usize + 1) * beta].copy_from_slice(block);
            }
            prop_assert_eq!(u, expected);
        }
    }

    #[test]
    fn edges_are_read_only_where_old_bytes_survive() {
        // β = 10, file of 25 bytes: blocks 0..=2 hold data.
        assert_eq!(edges_to_read(10, 25, 0, 10), Vec::<u64>::new()); // whole block 0
        assert_eq!(edges_to_read(10, 25, 5, 10), vec![0, 1]); // halves of 0 and 1
        assert_eq!(edges_to_read(10, 25, 12, 3), vec![1]); // inside block 1
        assert_eq!(edges_to_read(10, 25, 20, 10), Vec::<u64>::new()); // 25..30 is past the end
        assert_eq!(edges_to_read(10, 25, 30, 4), Vec::<u64>::new()); // past the end
        assert_eq!(edges_to_read(10, 25, 21, 2), vec![2]);
        assert!(patch_blocks(10, 25, 5, &[1; 10], &BTreeMap::new()).is_err());
        assert!(patch_blocks(10, 25, 5, &[], &BTreeMap::new()).is_err());
    }

    #[test]
    fn a_file_longer_than_the_deal_is_refused() {
        let roots = vec![merkle::block_root(&[0u8; 8]); 2];
        let e = sync_writes(8, &roots, &[1u8; 17]).unwrap_err().to_string();
        assert!(e.contains("at most N·β = 16 bytes"), "{e}");
    }
}
