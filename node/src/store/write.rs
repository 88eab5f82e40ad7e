//! Write(i, B) (§5.4): the rebuild on the server, committed as described in the
//! module docs of [`super`].

use super::error::{Result, StoreError};
use super::meta::{LastAnswer, PendingU};
use super::upload::read_u_chunked;
use super::{lock, rlock, runs, wlock, DealState, Store, WriteOutcome};
use dpor_core::merkle;
use dpor_core::state::{u_records, write_step, RunId, WriteStep};
use dpor_core::{code, RunTag};

impl Store {
    /// Write(i, B): sets U[i] = `block` with σ̃_U(i) = `sealed_u`, and runs HAdd (or,
    /// on the N-th write since the last C-rebuild, CRebuild), exactly as
    /// [`dpor_core::state::ServerState::write`]. Durable when it returns.
    ///
    /// Errors (changing nothing): [`StoreError::UnknownDeal`], [`StoreError::Phase`]
    /// before the upload finished, [`StoreError::Replay`], [`StoreError::Index`],
    /// [`StoreError::BlockSize`], [`StoreError::DiskFull`], [`StoreError::Io`],
    /// [`StoreError::Corrupt`] if a consumed run file holds non-canonical elements.
    pub fn write(&self, deal: u64, nonce: u64, index: u64, block: Vec<u8>, sealed_u: [u8; 32]) -> Result<WriteOutcome> {
        let entry = self.deal(deal)?;
        let _op = lock(&entry.op);
        // A pending update whose application failed earlier is retried first, and
        // deferred builds are finished (this path builds its run synchronously).
        self.apply_pending(&entry)?;
        self.settle_locked(&entry)?;
        let g = rlock(&entry.state);
        let st = g.as_ref().ok_or(StoreError::UnknownDeal(deal))?;
        st.require_live()?;
        st.require_intact()?;
        let meta = &st.meta;
        meta.check_nonce(nonce)?;
        let n = meta.num_blocks();
        if index >= n {
            return Err(StoreError::Index { index, num_blocks: n });
        }
        let beta = meta.params.block_bytes as usize;
        if block.len() != beta {
            return Err(StoreError::BlockSize { got: block.len(), expected: beta });
        }
        let tree = st.u_tree()?;
        let step = write_step(meta.write_count, meta.log_blocks());
        let built_at = meta.total_writes().saturating_add(1);
        let (tag, size) = match step {
            WriteStep::Level(l) => (RunTag::level(l), 2u64 << l),
            WriteStep::CRebuild => (RunTag::C, 2 * n),
        };
        let run = RunId { tag, built_at };
        self.ensure_space(runs::run_disk_bytes(&st.format, size).saturating_add(block.len() as u64))?;
        let mut blocks = self.compute_run(st, step, index, &block)?;
        self.apply_commit_fault(run, &mut blocks, st.format.width());
        let run_root = runs::write_run(&st.dir, run, &st.format, &blocks)?;
        self.keep_written(deal, run, run_root, blocks);

        let block_root = merkle::block_root(&block);
        let leaf = merkle::u_leaf(index, &block_root, &sealed_u);
        let root_u = merkle::root_from_path(leaf, index, &tree.path(index)?);
        let mut new = meta.clone();
        new.last_nonce = Some(nonce);
        new.root_u = root_u;
        // The state before this write stays collectable only once the owner confirms
        // it has the answer (its next accepted request): see `DealMeta::previous`.
        new.previous = meta.current_runs();
        new.last_answer = Some((nonce, LastAnswer::Written(WriteOutcome { step, run, run_root, root_u })));
        match step {
            WriteStep::Level(l) => {
                new.levels.retain(|(level, _, _)| *level > l);
                new.levels.insert(0, (l, run, run_root));
                new.write_count += 1;
            }
            WriteStep::CRebuild => {
                new.levels.clear();
                new.c = Some((run, run_root));
                new.write_count = 0;
                new.rebuild_count += 1;
            }
        }
        new.pending = vec![PendingU { index, block, sealed: sealed_u }];
        drop(g);

        let mut g = wlock(&entry.state);
        let Some(st) = g.as_mut() else {
            return Err(StoreError::UnknownDeal(deal));
        };
        self.commit_runs(st, new, sled::Batch::default(), [run])?;
        // Committed: from here the write is acknowledged.
        if let Some(t) = st.u_tree.as_mut() {
            t.set_leaf(index, leaf)?;
        }
        if let Err(e) = self.finish_pending(st, Some(&[block_root])) {
            tracing::warn!(deal, "write committed, U files not yet updated (retried later): {e}");
        }
        self.gc(&st.meta, &st.dir, false);
        Ok(WriteOutcome { step, run, run_root, root_u })
    }

    /// Applies and clears the deal's pending U update, if any. The caller holds the
    /// deal's mutation lock (`entry.op`), so the record does not change meanwhile.
    ///
    /// U's files are written and fsynced under the state's read lock only: reads
    /// overlay the pending update (`read.rs`), so they run beside it instead of
    /// waiting for its fsync (a batch's update is 512 scattered writes and an fsync,
    /// 10–15 ms here, during which the owner's next `status` and `u_paths` used to
    /// wait). The write lock is taken only to clear the update from the record.
    pub(crate) fn apply_pending(&self, entry: &super::Deal) -> Result<()> {
        let nonce = {
            let g = rlock(&entry.state);
            match g.as_ref() {
                Some(st) if !st.meta.pending.is_empty() => {
                    self.write_pending(st, None)?;
                    st.meta.last_nonce
                }
                _ => return Ok(()),
            }
        };
        let mut g = wlock(&entry.state);
        match g.as_mut() {
            Some(st) if !st.meta.pending.is_empty() && st.meta.last_nonce == nonce => self.clear_pending(st),
            _ => Ok(()),
        }
    }

    /// Writes the pending update into U's files, then clears it in the record (not
    /// flushed: if lost, it is re-applied on open, idempotently). `roots`: the pending
    /// blocks' block roots in order, if the caller already hashed them.
    pub(crate) fn finish_pending(&self, st: &mut DealState, roots: Option<&[alloy_primitives::B256]>) -> Result<()> {
        if st.meta.pending.is_empty() {
            return Ok(());
        }
        self.write_pending(st, roots)?;
        self.clear_pending(st)
    }

    /// Writes the pending update into U's files (pwrite + fsync), changing nothing in
    /// memory: `roots` as for [`Store::finish_pending`], else the batch's saved roots
    /// if they belong to this update, else hashed here.
    fn write_pending(&self, st: &DealState, roots: Option<&[alloy_primitives::B256]>) -> Result<()> {
        let saved = st.pending_roots.as_ref().filter(|(nonce, _)| st.meta.last_nonce == Some(*nonce)).map(|(_, r)| r.as_slice());
        let roots = roots.or(saved);
        let items: Vec<(u64, &[u8], [u8; 32])> = st.meta.pending.iter().map(|p| (p.index, p.block.as_slice(), p.sealed)).collect();
        st.u()?.write_scattered(&items, roots)
    }

    /// Clears the pending update (written by [`Store::write_pending`]) from the record.
    fn clear_pending(&self, st: &mut DealState) -> Result<()> {
        st.pending_roots = None;
        let mut cleared = st.meta.clone();
        cleared.pending = Vec::new();
        self.db.insert(super::meta::deal_key(cleared.params.deal), cleared.encode())?;
        st.meta = cleared;
        Ok(())
    }

    /// Applies deal `deal`'s pending U update (a batch's: [`Store::write_batch`] leaves
    /// it for after the acknowledgement), if any: what the next mutation of the deal
    /// would do first. Reads see the update before it is applied (they overlay it), and
    /// a crash before it re-applies it on open.
    ///
    /// Errors: [`StoreError::UnknownDeal`], [`StoreError::Io`], [`StoreError::Sled`].
    pub fn apply_pending_updates(&self, deal: u64) -> Result<()> {
        let entry = self.deal(deal)?;
        let _op = super::lock(&entry.op);
        self.apply_pending(&entry)
    }
}

impl Store {
    /// The coded blocks of the run a write builds: HAdd from the consumed levels (kept
    /// in memory or read from their files) and the record, or CRebuild of U with
    /// U[index] = block.
    fn compute_run(&self, st: &DealState, step: WriteStep, index: u64, block: &[u8]) -> Result<Vec<dpor_core::Fp>> {
        let meta = &st.meta;
        let width = st.format.width();
        match step {
            WriteStep::Level(l) => {
                let record = st.format.record(index, block)?;
                let mut consumed = Vec::with_capacity(l as usize);
                for want in 0..l {
                    let Some((_, id, root)) = meta.levels.iter().find(|(level, _, _)| *level == want) else {
                        return Err(StoreError::Corrupt(format!(
                            "deal {}: level {want} missing for t = {}",
                            meta.params.deal, meta.write_count
                        )));
                    };
                    consumed.push(self.consumed_level(st, want, *id, *root)?);
                }
                let refs: Vec<&[dpor_core::Fp]> = consumed.iter().map(|v| v.as_slice()).collect();
                Ok(code::h_add(meta.write_count, meta.log_blocks(), &record, &refs, width)?)
            }
            WriteStep::CRebuild => {
                let mut u = read_u_chunked(st, meta.num_blocks())?;
                if let Some(slot) = u.get_mut(index as usize) {
                    *slot = block.to_vec();
                }
                let records = u_records(&st.format, &u)?;
                drop(u);
                Ok(code::c_rebuild(&records, meta.log_blocks(), width)?)
            }
        }
    }
}
