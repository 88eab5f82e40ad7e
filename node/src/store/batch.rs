//! A batch of writes (issue 11 #1): many Write(i, B) of §5.4 in one owner request,
//! committed once.
//!
//! The batch is applied exactly as the same writes one after another
//! ([`dpor_core::state::ServerState::write`] for each, in order: every write is its
//! own HAdd, or the C-rebuild on the N-th write), but in memory: a run built and
//! consumed inside the batch never reaches the disk, and only the runs of the final
//! state that the batch built are written (at most k + 1 files, one directory fsync).
//! Then one flushed sled record commits the whole batch (the acknowledgement point):
//! new counters, manifest, rootU, the answer (for `Outcome`) and the U updates as
//! pending (one per distinct index, re-applied on open), exactly like a single write.
//! So a kill -9 at any point leaves the state before the batch or after all of it.
//! Why this instead of §6.1's bigger H entries: docs/SCHEME.md §10.

use super::error::{Result, StoreError};
use super::meta::{LastAnswer, PendingU};
use super::upload::read_u_chunked;
use super::{lock, rlock, runs, wlock, BatchOutcome, Store};
use dpor_core::merkle;
use dpor_core::state::{u_records, write_step, RunId, WriteStep};
use dpor_core::{code, Fp, RunTag};
use std::collections::BTreeMap;

/// One write of a batch: (index, block of β bytes, σ̃_U of the new block).
pub type BatchWrite = (u64, Vec<u8>, [u8; 32]);

impl Store {
    /// Writes a batch: for each `(i, B, σ̃)` in order, U[i] = B with σ̃_U(i) = σ̃ and
    /// HAdd (or the C-rebuild on the N-th write since the last one), exactly as that
    /// many [`Store::write`] calls, committed atomically and durably once (one sled
    /// flush; the run files of the final state that the batch built, fsynced, one
    /// directory fsync). The same index may appear several times (the last value stays
    /// in U; every write is a record in H).
    ///
    /// Errors (changing nothing): [`StoreError::UnknownDeal`], [`StoreError::Phase`],
    /// [`StoreError::Replay`], [`StoreError::Range`] for an empty batch,
    /// [`StoreError::Index`] / [`StoreError::BlockSize`] for any bad write,
    /// [`StoreError::DiskFull`], [`StoreError::Io`], [`StoreError::Corrupt`].
    pub fn write_batch(&self, deal: u64, nonce: u64, writes: Vec<BatchWrite>) -> Result<BatchOutcome> {
        let entry = self.deal(deal)?;
        let _op = lock(&entry.op);
        self.apply_pending(&entry)?;
        let g = rlock(&entry.state);
        let st = g.as_ref().ok_or(StoreError::UnknownDeal(deal))?;
        st.require_live()?;
        let meta = &st.meta;
        meta.check_nonce(nonce)?;
        if writes.is_empty() {
            return Err(StoreError::Range("a batch of no writes".into()));
        }
        let (n, k, width) = (meta.num_blocks(), meta.log_blocks(), st.format.width());
        let beta = meta.params.block_bytes as usize;
        for (index, block, _) in &writes {
            if *index >= n {
                return Err(StoreError::Index { index: *index, num_blocks: n });
            }
            if block.len() != beta {
                return Err(StoreError::BlockSize { got: block.len(), expected: beta });
            }
        }
        let mut tree = st.u_tree.clone().ok_or_else(|| StoreError::Corrupt(format!("deal {deal}: no U tree")))?;
        let (mut t, mut rebuilds) = (meta.write_count, meta.rebuild_count);
        // Levels of the state before the batch not yet consumed (on disk), and runs the
        // batch built that are still live (in memory).
        let mut disk_levels: BTreeMap<u32, (RunId, alloy_primitives::B256)> =
            meta.levels.iter().map(|(l, id, root)| (*l, (*id, *root))).collect();
        let mut mem_levels: BTreeMap<u32, (RunId, Vec<Fp>)> = BTreeMap::new();
        let mut new_c: Option<(RunId, Vec<Fp>)> = None;
        let mut overlay: BTreeMap<u64, (Vec<u8>, [u8; 32])> = BTreeMap::new();
        let count = writes.len() as u64;
        for (index, block, sealed) in writes {
            let built_at = rebuilds.saturating_mul(n).saturating_add(t).saturating_add(1);
            match write_step(t, k) {
                WriteStep::Level(l) => {
                    let record = st.format.record(index, &block)?;
                    let mut consumed = Vec::with_capacity(l as usize);
                    for want in 0..l {
                        if let Some((_, v)) = mem_levels.remove(&want) {
                            consumed.push(v);
                        } else if let Some((id, _)) = disk_levels.remove(&want) {
                            consumed.push(runs::read_elements(&st.dir, id, &st.format, 2u64 << want)?);
                        } else {
                            return Err(StoreError::Corrupt(format!("deal {deal}: level {want} missing for t = {t}")));
                        }
                    }
                    let refs: Vec<&[Fp]> = consumed.iter().map(|v| v.as_slice()).collect();
                    let mut blocks = code::h_add(t, k, &record, &refs, width)?;
                    let run = RunId { tag: RunTag::level(l), built_at };
                    self.apply_commit_fault(run, &mut blocks, width);
                    mem_levels.insert(l, (run, blocks));
                    t += 1;
                }
                WriteStep::CRebuild => {
                    let mut u = read_u_chunked(st, n)?;
                    for (i, (b, _)) in &overlay {
                        if let Some(slot) = u.get_mut(*i as usize) {
                            slot.clone_from(b);
                        }
                    }
                    if let Some(slot) = u.get_mut(index as usize) {
                        slot.clone_from(&block);
                    }
                    let records = u_records(&st.format, &u)?;
                    drop(u);
                    let mut blocks = code::c_rebuild(&records, k, width)?;
                    drop(records);
                    let run = RunId { tag: RunTag::C, built_at };
                    self.apply_commit_fault(run, &mut blocks, width);
                    new_c = Some((run, blocks));
                    mem_levels.clear();
                    disk_levels.clear();
                    t = 0;
                    rebuilds += 1;
                }
            }
            tree.set_leaf(index, merkle::u_leaf(index, &merkle::block_root(&block), &sealed))?;
            overlay.insert(index, (block, sealed));
        }

        // The runs to write: C (if rebuilt) and the batch's live levels.
        let to_write: Vec<(RunId, Vec<Fp>)> = new_c.into_iter().chain(mem_levels.into_values()).collect();
        let run_bytes: u64 = to_write
            .iter()
            .map(|(_, b)| runs::run_disk_bytes(&st.format, (b.len() / width.max(1)) as u64))
            .fold(0u64, u64::saturating_add);
        self.ensure_space(run_bytes.saturating_add(overlay.len() as u64 * beta as u64))?;
        let mut written: Vec<(RunId, alloy_primitives::B256)> = Vec::with_capacity(to_write.len());
        for (run, blocks) in &to_write {
            match runs::write_run_files(&st.dir, *run, &st.format, blocks) {
                Ok(root) => written.push((*run, root)),
                Err(e) => {
                    for (r, _) in &written {
                        runs::remove_run(&st.dir, *r);
                    }
                    return Err(e);
                }
            }
        }
        drop(to_write);
        if let Err(e) = runs::sync_dir(&st.dir) {
            for (r, _) in &written {
                runs::remove_run(&st.dir, *r);
            }
            return Err(e);
        }

        let root_u = tree.root();
        let outcome = BatchOutcome { count, root_u, runs: written.clone() };
        let mut new = meta.clone();
        new.last_nonce = Some(nonce);
        new.root_u = root_u;
        new.previous = meta.current_runs();
        new.last_answer = Some((nonce, LastAnswer::WrittenBatch(outcome.clone())));
        let mut levels: Vec<(u32, RunId, alloy_primitives::B256)> = disk_levels.into_iter().map(|(l, (id, root))| (l, id, root)).collect();
        for (run, root) in &written {
            match run.tag.as_level() {
                Some(l) => levels.push((l, *run, *root)),
                None => new.c = Some((*run, *root)),
            }
        }
        levels.sort_by_key(|(l, _, _)| *l);
        new.levels = levels;
        new.write_count = t;
        new.rebuild_count = rebuilds;
        new.pending = overlay.into_iter().map(|(index, (block, sealed))| PendingU { index, block, sealed }).collect();
        drop(g);

        let mut g = wlock(&entry.state);
        let Some(st) = g.as_mut() else {
            return Err(StoreError::UnknownDeal(deal));
        };
        if let Err(e) = self.commit(&new, Some(&st.meta), sled::Batch::default()) {
            for (r, _) in &written {
                runs::remove_run(&st.dir, *r);
            }
            return Err(e);
        }
        // Committed: from here the batch is acknowledged.
        st.meta = new;
        st.u_tree = Some(tree);
        if let Err(e) = self.finish_pending(st) {
            tracing::warn!(deal, "batch committed, U files not yet updated (retried later): {e}");
        }
        self.gc(&st.meta, &st.dir, false);
        Ok(outcome)
    }
}
