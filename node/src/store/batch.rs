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
use super::meta::{Build, BuildInputs, DealMeta, LastAnswer, PendingU};
use super::upload::read_u_chunked;
use super::snapshot as snapshot_file;
use super::{lock, rlock, runs, wlock, BatchOutcome, DealState, Store};
use dpor_core::merkle;
use dpor_core::state::{u_records, write_step, RunId, WriteStep};
use dpor_core::{code, Fp, RunTag};
use std::collections::BTreeMap;

/// The runs a batch staged, with their roots, in staging order.
type StagedRuns = Vec<(RunId, alloy_primitives::B256)>;

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
        self.write_batch_with_roots(deal, nonce, writes, None)
    }

    /// [`Store::write_batch`] with each write's block root (`merkle::block_root`, in
    /// the writes' order) when the caller has them: a batch signed over roots, whose
    /// roots the handler checked against the blocks (issue 23 #3). U's new leaves take
    /// them instead of hashing the blocks again; a wrong length is
    /// [`StoreError::Range`]. Errors: as [`Store::write_batch`].
    pub fn write_batch_with_roots(
        &self,
        deal: u64,
        nonce: u64,
        writes: Vec<BatchWrite>,
        roots: Option<Vec<alloy_primitives::B256>>,
    ) -> Result<BatchOutcome> {
        if let Some(r) = roots.as_ref().filter(|r| r.len() != writes.len()) {
            return Err(StoreError::Range(format!("{} writes with {} block roots", writes.len(), r.len())));
        }
        // Each index's last root, in index order (as U's new leaves below).
        let final_roots: Option<Vec<alloy_primitives::B256>> = roots.map(|roots| {
            let mut last: BTreeMap<u64, alloy_primitives::B256> = BTreeMap::new();
            for ((index, _, _), root) in writes.iter().zip(roots) {
                // A later write of the same index replaces the earlier (as `overlay`).
                last.insert(*index, root);
            }
            last.into_values().collect()
        });
        let entry = self.deal(deal)?;
        let _op = lock(&entry.op);
        self.apply_pending(&entry)?;
        // Deferred runs this batch consumes (or a deferred C-rebuild it would start a
        // second one over) are built first.
        let settle = rlock(&entry.state).as_ref().is_some_and(|st| needs_settle(&st.meta, writes.len() as u64));
        if settle {
            self.settle_locked(&entry)?;
        }
        let g = rlock(&entry.state);
        let st = g.as_ref().ok_or(StoreError::UnknownDeal(deal))?;
        st.require_live()?;
        st.require_intact()?;
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
        let mut tree = st.u_tree()?.clone();
        let (mut t, mut rebuilds) = (meta.write_count, meta.rebuild_count);
        // Levels of the state before the batch not yet consumed (on disk), and runs the
        // batch built that are still live (in memory), or deferred (built later).
        let mut disk_levels: BTreeMap<u32, (RunId, alloy_primitives::B256)> =
            meta.levels.iter().map(|(l, id, root)| (*l, (*id, *root))).collect();
        let mut mem_levels: BTreeMap<u32, (RunId, Vec<Fp>)> = BTreeMap::new();
        let mut deferred_levels: BTreeMap<u32, Build> = BTreeMap::new();
        let mut new_c: Option<(RunId, Vec<Fp>)> = None;
        let mut deferred_c: Option<RunId> = None;
        let mut overlay: BTreeMap<u64, (Vec<u8>, [u8; 32])> = BTreeMap::new();
        // While a C-rebuild is deferred: U's blocks as of it, saved before this batch
        // overwrites them (see `deferred.rs`).
        let mut c_pending = meta.c_building();
        let mut snapshot: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        // Whether this batch starts a new deferred C build (its snapshot file then
        // starts again at record 0, and the blocks saved for the old one do not count).
        let mut fresh_c = false;
        let count = writes.len() as u64;
        // Which writes build a run that survives the batch (written at its end), and
        // the bytes those runs take: checked before anything is written.
        let plan = plan_batch(k, meta.write_count, meta.levels.iter().map(|(l, _, _)| *l), writes.len(), |size| self.defers(size));
        let distinct = writes.iter().map(|(i, _, _)| *i).collect::<std::collections::BTreeSet<u64>>().len() as u64;
        let run_bytes = plan.written_blocks.iter().map(|size| runs::run_disk_bytes(&st.format, *size)).fold(0u64, u64::saturating_add);
        // U's pending blocks, and as many C snapshot records at most.
        let per_distinct = (beta as u64).saturating_add(snapshot_file::record_bytes(beta as u64));
        self.ensure_space(run_bytes.saturating_add(distinct.saturating_mul(per_distinct)))?;
        // The batch's surviving runs are hashed and written (not yet fsynced) on a
        // second thread as soon as they are built, while this one goes on with the
        // next writes (issue 23 #2); their fsyncs are issued together at the end.
        let (tx, rx) = std::sync::mpsc::channel::<(RunId, Vec<Fp>)>();
        let (dir, format) = (&st.dir, &st.format);
        let (staged, u_roots) =
            std::thread::scope(|scope| -> Result<(StagedRuns, Vec<alloy_primitives::B256>)> {
                let writer = scope.spawn(move || -> Result<runs::RunWriter<'_>> {
                    let mut w = runs::RunWriter::new(dir, format);
                    for (run, blocks) in rx {
                        let root = w.stage(run, &blocks)?;
                        // Kept (under its root) for the batch that will consume it.
                        self.keep_written(deal, run, root, blocks);
                    }
                    Ok(w)
                });
                let looped = (|| -> Result<()> {
                    for (position, (index, block, sealed)) in writes.into_iter().enumerate() {
                        let saved_before = !fresh_c && st.snapshot_saved.contains(&index);
                        if c_pending && !saved_before && !snapshot.contains_key(&index) {
                            let old = match overlay.get(&index) {
                                Some((b, _)) => b.clone(),
                                None => st.u()?.read_blocks(index, 1)?.pop().unwrap_or_default(),
                            };
                            snapshot.insert(index, old);
                        }
                        let built_at = rebuilds.saturating_mul(n).saturating_add(t).saturating_add(1);
                        match write_step(t, k) {
                            WriteStep::Level(l) => {
                                let run = RunId { tag: RunTag::level(l), built_at };
                                let from_disk = (0..l).all(|j| disk_levels.contains_key(&j));
                                if from_disk && self.defers(2u64 << l) {
                                    let consumed: Vec<RunId> = (0..l).filter_map(|j| disk_levels.remove(&j).map(|(id, _)| id)).collect();
                                    let inputs = BuildInputs::Level { t, index, block: block.clone(), consumed };
                                    deferred_levels.insert(l, Build { run, inputs });
                                } else {
                                    let record = st.format.record(index, &block)?;
                                    let mut consumed = Vec::with_capacity(l as usize);
                                    for want in 0..l {
                                        if let Some((_, v)) = mem_levels.remove(&want) {
                                            consumed.push(v);
                                        } else if let Some(job) = deferred_levels.remove(&want) {
                                            consumed.push(level_now(st, &job)?);
                                        } else if let Some((id, root)) = disk_levels.remove(&want) {
                                            consumed.push(self.consumed_level(st, want, id, root)?);
                                        } else {
                                            return Err(StoreError::Corrupt(format!("deal {deal}: level {want} missing for t = {t}")));
                                        }
                                    }
                                    let refs: Vec<&[Fp]> = consumed.iter().map(|v| v.as_slice()).collect();
                                    let mut blocks = code::h_add(t, k, &record, &refs, width)?;
                                    self.apply_commit_fault(run, &mut blocks, width);
                                    if plan.staged_early.get(position).copied().unwrap_or(false) {
                                        // No later write of this batch consumes it: hashed and
                                        // written now, on the writer thread (a failed send means
                                        // the writer stopped on an error, which its join reports).
                                        let _ = tx.send((run, blocks));
                                    } else {
                                        mem_levels.insert(l, (run, blocks));
                                    }
                                }
                                t += 1;
                            }
                            WriteStep::CRebuild => {
                                let run = RunId { tag: RunTag::C, built_at };
                                if self.defers(2 * n) {
                                    // U as of this write: its files, overlaid with this batch's
                                    // writes so far and this one.
                                    overlay.insert(index, (block.clone(), sealed));
                                    snapshot = overlay.iter().map(|(i, (b, _))| (*i, b.clone())).collect();
                                    deferred_c = Some(run);
                                    new_c = None;
                                    c_pending = true;
                                    fresh_c = true;
                                } else {
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
                                    self.apply_commit_fault(run, &mut blocks, width);
                                    new_c = Some((run, blocks));
                                    deferred_c = None;
                                    c_pending = false;
                                    fresh_c = true;
                                    snapshot.clear();
                                }
                                mem_levels.clear();
                                disk_levels.clear();
                                deferred_levels.clear();
                                t = 0;
                                rebuilds += 1;
                            }
                        }
                        overlay.insert(index, (block, sealed));
                    }
                    Ok(())
                })();
                if looped.is_ok() {
                    // C (if rebuilt inside the batch) and any run the plan did not stage early.
                    for job in new_c.take().into_iter().chain(std::mem::take(&mut mem_levels).into_values()) {
                        let _ = tx.send(job);
                    }
                }
                drop(tx);
                // U's new leaves, while the writer finishes: only each index's last value
                // counts; their block roots are hashed once, on every core, and reused for
                // U's `u.roots` file below.
                let u_roots = match (&looped, final_roots) {
                    (Err(_), _) => Vec::new(),
                    // Signed over roots: the handler hashed every block already.
                    (Ok(()), Some(r)) if r.len() == overlay.len() => r,
                    (Ok(()), _) => {
                        let finals: Vec<&[u8]> = overlay.values().map(|(b, _)| b.as_slice()).collect();
                        merkle::block_roots(&finals)
                    }
                };
                let writer = writer.join().map_err(|_| StoreError::Corrupt("the batch's run writer panicked".into()));
                looped?;
                Ok((writer??.finish()?, u_roots))
            })?;
        let new_leaves: Vec<(u64, alloy_primitives::B256)> =
            overlay.iter().zip(&u_roots).map(|((index, (_, sealed)), root)| (*index, merkle::u_leaf(*index, root, sealed))).collect();
        tree.set_leaves(&new_leaves)?;
        let mut written = staged;
        // The C snapshot's new records, synced before the commit that counts them (the
        // folder's sync below covers a new file).
        let snapshot_base = if fresh_c { 0 } else { meta.snapshot_records };
        let saved = snapshot_file::append(&st.dir, beta as u64, snapshot_base, snapshot.iter().map(|(i, b)| (*i, b.as_slice())));
        if let Err(e) = saved.and_then(|()| runs::sync_dir(&st.dir)) {
            for (r, _) in &written {
                runs::remove_run(&st.dir, *r);
            }
            return Err(e);
        }
        // Deferred runs join the new state with a zero root until they are built.
        let mut new_builds: Vec<Build> = Vec::new();
        if let Some(run) = deferred_c {
            written.push((run, alloy_primitives::B256::ZERO));
            new_builds.push(Build { run, inputs: BuildInputs::C });
        }
        for job in deferred_levels.into_values() {
            written.push((job.run, alloy_primitives::B256::ZERO));
            new_builds.push(job);
        }
        written.sort_by_key(|(r, _)| r.tag.0);
        let deferred_any = !new_builds.is_empty();

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
        new.building.extend(new_builds);
        new.snapshot_records = if c_pending { snapshot_base.saturating_add(snapshot.len() as u64) } else { 0 };
        new.drop_obsolete_builds();
        drop(g);

        let mut g = wlock(&entry.state);
        let Some(st) = g.as_mut() else {
            return Err(StoreError::UnknownDeal(deal));
        };
        self.commit_runs(st, new, sled::Batch::default(), written.iter().map(|(r, _)| *r))?;
        // Committed: from here the batch is acknowledged.
        st.u_tree = Some(tree);
        if fresh_c || !c_pending {
            st.snapshot_saved.clear();
        }
        if c_pending {
            st.snapshot_saved.extend(snapshot.into_keys());
        }
        // U's files are updated after the acknowledgement (issue 23 #2), by
        // `apply_pending_updates` or the deal's next mutation: reads overlay the
        // pending update, and a crash re-applies it on open.
        st.pending_roots = Some((nonce, u_roots));
        self.gc(&st.meta, &st.dir, false);
        if deferred_any {
            self.build_signal.notify();
        }
        Ok(outcome)
    }
}

/// What a batch of writes will leave on disk, computed before it runs (the same steps
/// as the batch's loop, without the coding).
#[derive(Debug, Default, PartialEq, Eq)]
struct BatchPlan {
    /// For each write of the batch: whether the level it builds inside the batch
    /// survives it (no later write of the batch consumes it), so that it can be
    /// written as soon as it is built.
    staged_early: Vec<bool>,
    /// Sizes, in coded blocks, of the runs the batch writes (its surviving levels built
    /// inside it and C if it rebuilds C inside it; deferred builds are not written by it).
    written_blocks: Vec<u64>,
}

/// The [`BatchPlan`] of `count` writes on a file of N = 2^`k` blocks whose write
/// counter is `t` and whose levels `on_disk` hold runs; `defers(size)` says whether a
/// run of `size` blocks built from levels all on disk is deferred ([`Store::defers`]).
fn plan_batch(k: u32, mut t: u64, on_disk: impl IntoIterator<Item = u32>, count: usize, defers: impl Fn(u64) -> bool) -> BatchPlan {
    let n = 1u64 << k;
    let mut on_disk: std::collections::BTreeSet<u32> = on_disk.into_iter().collect();
    // Levels built by this batch and still live: level -> (position, built inside the batch).
    let mut live: BTreeMap<u32, (usize, bool)> = BTreeMap::new();
    let mut c_inside = false;
    for position in 0..count {
        match write_step(t, k) {
            WriteStep::Level(l) => {
                let from_disk = (0..l).all(|j| on_disk.contains(&j));
                for j in 0..l {
                    on_disk.remove(&j);
                    live.remove(&j);
                }
                live.insert(l, (position, !(from_disk && defers(2u64 << l))));
                t += 1;
            }
            WriteStep::CRebuild => {
                c_inside = !defers(2 * n);
                on_disk.clear();
                live.clear();
                t = 0;
            }
        }
    }
    let mut plan = BatchPlan { staged_early: vec![false; count], written_blocks: Vec::new() };
    if c_inside {
        plan.written_blocks.push(2 * n);
    }
    for (l, (position, inside)) in live {
        if inside {
            plan.staged_early[position] = true;
            plan.written_blocks.push(2u64 << l);
        }
    }
    plan
}

/// Whether a batch of `count` writes on `meta` consumes a level whose build is
/// deferred, or crosses a C-rebuild while one is deferred: those builds come first.
fn needs_settle(meta: &DealMeta, count: u64) -> bool {
    if meta.building.is_empty() {
        return false;
    }
    let k = meta.log_blocks();
    let mut t = meta.write_count;
    let mut original: Vec<u32> = meta.levels.iter().map(|(l, _, _)| *l).collect();
    for _ in 0..count {
        match write_step(t, k) {
            WriteStep::Level(l) => {
                for (level, id, _) in &meta.levels {
                    if *level < l && original.contains(level) && meta.is_building(*id) {
                        return true;
                    }
                }
                original.retain(|x| *x >= l);
                t += 1;
            }
            WriteStep::CRebuild => return meta.c_building(),
        }
    }
    false
}

/// A deferred level of this batch computed now (a later write of the same batch
/// consumes it).
fn level_now(st: &DealState, job: &Build) -> Result<Vec<Fp>> {
    let BuildInputs::Level { t, index, block, consumed } = &job.inputs else {
        return Err(StoreError::Corrupt("a deferred C-rebuild consumed as a level".into()));
    };
    let record = st.format.record(*index, block)?;
    let mut levels = Vec::with_capacity(consumed.len());
    for (j, id) in consumed.iter().enumerate() {
        levels.push(runs::read_elements(&st.dir, *id, &st.format, 2u64 << j)?);
    }
    let refs: Vec<&[Fp]> = levels.iter().map(|v| v.as_slice()).collect();
    Ok(code::h_add(*t, st.meta.log_blocks(), &record, &refs, st.format.width())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without deferral and without crossing a C-rebuild, the runs a batch leaves are
    /// the set bits ℓ of the final counter t_end whose last build, the write at time
    /// (t_end with bits 0..ℓ cleared) − 1, falls inside the batch (an independent
    /// count: no simulation of the steps).
    #[test]
    fn the_plan_writes_exactly_the_levels_the_batch_leaves() {
        let k = 10u32;
        for t0 in 0..300u64 {
            for count in [1usize, 2, 3, 7, 64, 100, 255, 511] {
                let t_end = t0 + count as u64;
                if t_end >= 1 << k {
                    continue;
                }
                let on_disk: Vec<u32> = (0..k).filter(|l| (t0 >> l) & 1 == 1).collect();
                let plan = plan_batch(k, t0, on_disk, count, |_| false);
                let mut expected: Vec<u64> = Vec::new();
                let mut positions = vec![false; count];
                for l in 0..k {
                    let last = (t_end >> l << l).wrapping_sub(1);
                    if (t_end >> l) & 1 == 1 && last >= t0 {
                        expected.push(2u64 << l);
                        positions[(last - t0) as usize] = true;
                    }
                }
                assert_eq!(plan.written_blocks, expected, "t0 = {t0}, count = {count}");
                assert_eq!(plan.staged_early, positions, "t0 = {t0}, count = {count}");
            }
        }
    }

    /// A level built only from levels on disk, of a deferred size, is not written by
    /// the batch; C rebuilt inside the batch is, unless deferred.
    #[test]
    fn deferred_runs_and_c_rebuilds_are_planned_as_the_loop_runs_them() {
        // t = 3 (levels 0 and 1 on disk): the write builds level 2 (8 blocks) from them.
        let plan = plan_batch(4, 3, [0, 1], 1, |size| size >= 8);
        assert_eq!(plan, BatchPlan { staged_early: vec![false], written_blocks: vec![] });
        let plan = plan_batch(4, 3, [0, 1], 1, |_| false);
        assert_eq!(plan, BatchPlan { staged_early: vec![true], written_blocks: vec![8] });
        // N = 16, t = 15: the first write rebuilds C (32 blocks), the second builds level 0.
        let plan = plan_batch(4, 15, [0, 1, 2, 3], 2, |_| false);
        assert_eq!(plan, BatchPlan { staged_early: vec![false, true], written_blocks: vec![32, 2] });
        let plan = plan_batch(4, 15, [0, 1, 2, 3], 2, |size| size >= 32);
        assert_eq!(plan, BatchPlan { staged_early: vec![false, true], written_blocks: vec![2] });
    }
}
