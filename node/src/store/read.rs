//! Reads (public): U blocks with their paths, coded blocks of any retained run with
//! their run paths (from the stored tree, never rehashed), leaves and σ̃. A read of a
//! run whose build is deferred builds it first (`deferred.rs`).

use super::error::{Result, StoreError};
use super::{runs, DealState, Store, MAX_READ_BYTES};
use alloy_primitives::B256;
use dpor_core::state::RunId;
use std::path::PathBuf;

/// Checks `start + count ≤ size` and `count·item_bytes ≤ MAX_READ_BYTES`.
fn check_range(start: u64, count: u64, size: u64, item_bytes: u64) -> Result<()> {
    if start.checked_add(count).is_none_or(|end| end > size) {
        return Err(StoreError::Range(format!("{start}+{count} is past {size}")));
    }
    if count.saturating_mul(item_bytes) > MAX_READ_BYTES {
        return Err(StoreError::Range(format!("{count} items exceed the {MAX_READ_BYTES}-byte read cap")));
    }
    Ok(())
}

impl DealState {
    /// The size of a retained run (current or pinned) that has files here.
    fn run_size(&self, run: RunId) -> Result<u64> {
        self.meta
            .retained_runs()
            .into_iter()
            .find(|(id, _, _)| *id == run)
            .map(|(_, size, _)| size)
            .ok_or(StoreError::UnknownRun { deal: self.meta.params.deal, run })
    }

    /// U blocks with a pending (committed, not yet applied) update overlaid.
    fn u_blocks(&self, start: u64, count: u64) -> Result<Vec<Vec<u8>>> {
        let mut out = self.u()?.read_blocks(start, count)?;
        for p in &self.meta.pending {
            if p.index >= start && p.index < start + count {
                if let Some(slot) = out.get_mut((p.index - start) as usize) {
                    *slot = p.block.clone();
                }
            }
        }
        Ok(out)
    }

    fn u_sealed(&self, start: u64, count: u64) -> Result<Vec<[u8; 32]>> {
        let mut out = self.u()?.read_sealed(start, count)?;
        for p in &self.meta.pending {
            if p.index >= start && p.index < start + count {
                if let Some(slot) = out.get_mut((p.index - start) as usize) {
                    *slot = p.sealed;
                }
            }
        }
        Ok(out)
    }

    fn u_roots(&self, start: u64, count: u64) -> Result<Vec<B256>> {
        let mut out = self.u()?.read_roots(start, count)?;
        for p in &self.meta.pending {
            if p.index >= start && p.index < start + count {
                if let Some(slot) = out.get_mut((p.index - start) as usize) {
                    *slot = dpor_core::merkle::block_root(&p.block);
                }
            }
        }
        Ok(out)
    }
}

/// U's leaf parts and path for one index: (block root, σ̃_U, path from the leaf up).
pub type ULeafPath = (B256, [u8; 32], Vec<B256>);

impl Store {
    /// Read(i): U[i], σ̃_U(i) and the U-tree path of leaf i (siblings from the leaf
    /// up), to check against the root U of a digest.
    ///
    /// Errors: [`StoreError::UnknownDeal`], [`StoreError::Phase`] while uploading,
    /// [`StoreError::Index`], [`StoreError::Io`].
    pub fn read(&self, deal: u64, index: u64) -> Result<(Vec<u8>, [u8; 32], Vec<B256>)> {
        self.with_state(deal, |st| {
            st.require_live()?;
            let n = st.meta.num_blocks();
            if index >= n {
                return Err(StoreError::Index { index, num_blocks: n });
            }
            let tree = st.u_tree()?;
            let block = st.u_blocks(index, 1)?.pop().unwrap_or_default();
            let sealed = st.u_sealed(index, 1)?.pop().unwrap_or_default();
            Ok((block, sealed, tree.path(index)?))
        })
    }

    /// U's leaf parts and paths for several indices at once, from one snapshot of the
    /// state: for each index, (block root, σ̃_U, U-tree path from the leaf up). What an
    /// owner needs before a batch of writes (`Request::UPaths`).
    ///
    /// Errors: [`StoreError::UnknownDeal`], [`StoreError::Phase`] while uploading,
    /// [`StoreError::Index`] (any index ≥ N), [`StoreError::Io`].
    pub fn u_paths(&self, deal: u64, indices: &[u64]) -> Result<Vec<ULeafPath>> {
        self.with_state(deal, |st| {
            st.require_live()?;
            let n = st.meta.num_blocks();
            let tree = st.u_tree()?;
            let mut out = Vec::with_capacity(indices.len());
            for &index in indices {
                if index >= n {
                    return Err(StoreError::Index { index, num_blocks: n });
                }
                let root = st.u_roots(index, 1)?.pop().unwrap_or_default();
                let sealed = st.u_sealed(index, 1)?.pop().unwrap_or_default();
                out.push((root, sealed, tree.path(index)?));
            }
            Ok(out)
        })
    }

    /// U blocks `start..start+count` (β bytes each).
    ///
    /// Errors: [`StoreError::UnknownDeal`], [`StoreError::Phase`] while uploading,
    /// [`StoreError::Range`], [`StoreError::Io`].
    pub fn u_blocks(&self, deal: u64, start: u64, count: u64) -> Result<Vec<Vec<u8>>> {
        self.with_state(deal, |st| {
            st.require_live()?;
            check_range(start, count, st.meta.num_blocks(), st.meta.params.block_bytes as u64)?;
            st.u_blocks(start, count)
        })
    }

    /// U leaves' contents `start..start+count`: (block root, σ̃_U) of each index.
    ///
    /// Errors: as [`Store::u_blocks`].
    pub fn u_leaves(&self, deal: u64, start: u64, count: u64) -> Result<Vec<(B256, [u8; 32])>> {
        self.with_state(deal, |st| {
            st.require_live()?;
            check_range(start, count, st.meta.num_blocks(), 64)?;
            Ok(st.u_roots(start, count)?.into_iter().zip(st.u_sealed(start, count)?).collect())
        })
    }

    /// Coded blocks of `run` (8s bytes each) at `positions`, each with its run-tree
    /// path. `run` may be current or belong to a pinned digest.
    ///
    /// Errors: [`StoreError::UnknownDeal`], [`StoreError::UnknownRun`],
    /// [`StoreError::Range`] (a position ≥ size, or too many), [`StoreError::Io`]
    /// (e.g. the file was deleted behind the store's back).
    pub fn coded(&self, deal: u64, run: RunId, positions: &[u64]) -> Result<Vec<(Vec<u8>, Vec<B256>)>> {
        self.ensure_built(deal, run)?;
        self.with_state(deal, |st| {
            let size = check_positions(st, run, positions)?;
            let blocks = runs::read_positions(&st.dir, run, &st.format, positions)?;
            let paths = runs::read_paths(&st.dir, run, size, positions)?;
            Ok(blocks.into_iter().zip(paths).collect())
        })
    }

    /// What the node still has of `run` at `positions`, for public reads (`Samples`):
    /// each position's coded block (8s bytes, or **empty** if the blocks file is
    /// missing, truncated or unreadable there) with the longest prefix of its run-tree
    /// path the tree file still holds (empty if the tree file is missing). A damaged
    /// run is served as far as it goes, never refused as a whole; readers verify every
    /// block against the run root (`dpor_core::salvage`).
    ///
    /// Errors: [`StoreError::UnknownDeal`], [`StoreError::UnknownRun`],
    /// [`StoreError::Range`] (a position ≥ size, or too many).
    pub fn served(&self, deal: u64, run: RunId, positions: &[u64]) -> Result<Vec<(Vec<u8>, Vec<B256>)>> {
        self.ensure_built(deal, run)?;
        self.with_state(deal, |st| {
            let size = check_positions(st, run, positions)?;
            let (out, damaged) = runs::read_served(&st.dir, run, &st.format, size, positions, true);
            if damaged > 0 {
                tracing::warn!(deal, %run, damaged, asked = positions.len(), "serving a damaged run: some blocks or paths are unreadable");
            }
            Ok(out)
        })
    }

    /// Coded blocks `start..start+count` of `run`, without paths; a block that cannot
    /// be read (missing, truncated or unreadable file) is **empty**, the others are
    /// served (see [`Store::served`]).
    ///
    /// Errors: [`StoreError::UnknownDeal`], [`StoreError::UnknownRun`],
    /// [`StoreError::Range`].
    pub fn coded_range(&self, deal: u64, run: RunId, start: u64, count: u64) -> Result<Vec<Vec<u8>>> {
        self.ensure_built(deal, run)?;
        self.with_state(deal, |st| {
            let size = st.run_size(run)?;
            check_range(start, count, size, st.format.coded_block_bytes() as u64)?;
            let positions: Vec<u64> = (start..start + count).collect();
            let (out, damaged) = runs::read_served(&st.dir, run, &st.format, size, &positions, false);
            if damaged > 0 {
                tracing::debug!(deal, %run, "serving a damaged run's blocks");
            }
            Ok(out.into_iter().map(|(b, _)| b).collect())
        })
    }

    /// Run-tree leaves `start..start+count` of `run` (ENCODING §3 run leaves).
    ///
    /// Errors: as [`Store::coded`].
    pub fn run_leaves(&self, deal: u64, run: RunId, start: u64, count: u64) -> Result<Vec<B256>> {
        self.ensure_built(deal, run)?;
        self.with_state(deal, |st| {
            let size = st.run_size(run)?;
            check_range(start, count, size, 32)?;
            runs::read_leaves(&st.dir, run, start, count)
        })
    }

    /// The owner's σ̃ of positions `start..start+count` of `run` (`None` where none
    /// was stored).
    ///
    /// Errors: as [`Store::coded`], and [`StoreError::Sled`].
    pub fn sealed(&self, deal: u64, run: RunId, start: u64, count: u64) -> Result<Vec<Option<[u8; 32]>>> {
        self.with_state(deal, |st| {
            let size = st.run_size(run)?;
            check_range(start, count, size, 32)?;
            super::sealed::read(&self.db, deal, run, start, count)
        })
    }

    /// The path of `run`'s blocks file (for the demo's "delete blocks on disk").
    ///
    /// Errors: [`StoreError::UnknownDeal`], [`StoreError::UnknownRun`].
    pub fn run_file(&self, deal: u64, run: RunId) -> Result<PathBuf> {
        self.ensure_built(deal, run)?;
        self.with_state(deal, |st| {
            st.run_size(run)?;
            Ok(runs::blocks_path(&st.dir, run))
        })
    }
}

/// Checks that every one of `positions` is inside `run` and that the answer (a coded
/// block and a path per position) fits in a message; returns the run's size in blocks.
///
/// Errors: [`StoreError::UnknownRun`], [`StoreError::Range`].
fn check_positions(st: &DealState, run: RunId, positions: &[u64]) -> Result<u64> {
    let size = st.run_size(run)?;
    if let Some(p) = positions.iter().find(|p| **p >= size) {
        return Err(StoreError::Range(format!("position {p} of a run of {size}")));
    }
    let cb = st.format.coded_block_bytes() as u64;
    check_range(0, positions.len() as u64, u64::MAX, cb + 32 * 32)?;
    Ok(size)
}
