//! Deamortized rebuilds (§6.1 of the paper, "Deamortization"; docs/SCHEME.md §10.3):
//! a write whose HAdd or C-rebuild would build a run of at least
//! [`StoreConfig::defer_from_blocks`](super::StoreConfig::defer_from_blocks) coded
//! blocks is committed and acknowledged at once, with the run's build recorded in
//! the deal record ([`Build`]) and the run's root left zero; the run is built later,
//! on the background builder's thread ([`Builder`]), or by the first operation that
//! needs it (a write that consumes it, a read of it, a co-signature, a request for
//! the roots). Either way the run is exactly what the synchronous write would have
//! built: its inputs stay on disk until then.
//!
//! - A level's inputs are its record (in the record) and the consumed levels' run
//!   files, which garbage collection keeps while the build is pending.
//! - A C-rebuild's input is U as of the write that triggered it. Later writes change
//!   U in place, so while a C build is pending every write first saves the old value
//!   of each block it overwrites (once per index) in the deal's snapshot file
//!   (`snapshot.rs`), synced before the flushed sled write that commits it and counts
//!   the records, before U's files change. The build reads U's files and then
//!   overlays every saved block: a block read after (or torn by) an overwrite has its
//!   saved value, which was durable first.
//!
//! Crash safety: a build's result counts only once one flushed sled write names its
//! root (run files first, fsynced), as for every run. After a kill -9 the pending
//! builds are still in the record, their inputs on disk, and the builder starts them
//! again on open.
//!
//! Locks: builders hold the deal's `builds` mutex while building (never the mutation
//! lock) and take the mutation lock only to commit roots; an operation that needs a
//! run holds the mutation lock and then takes `builds`, so it waits for a build in
//! flight and finishes the others itself. No lock is held in the other order.

use super::error::Result;
use super::meta::{self, Build, BuildInputs};
use super::u::UFiles;
use super::{lock, rlock, runs, snapshot, wlock, Deal, Store, MAX_READ_BYTES};
use alloy_primitives::B256;
use dpor_core::state::{u_records, RunId};
use dpor_core::{code, Fp};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

/// Wakes the background builder when a write defers a build.
#[derive(Debug, Default)]
pub(crate) struct BuildSignal {
    pending: Mutex<bool>,
    wake: Condvar,
}

impl BuildSignal {
    pub(crate) fn notify(&self) {
        *lock(&self.pending) = true;
        self.wake.notify_all();
    }

    /// Waits until notified or `timeout`; returns whether it was notified.
    fn wait(&self, timeout: Duration) -> bool {
        let g = lock(&self.pending);
        let (mut g, _) = self.wake.wait_timeout_while(g, timeout, |p| !*p).unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut *g, false)
    }
}

/// The background builder: a thread that builds deferred runs as writes defer them.
/// It holds the store only while it works (a dropped store ends it within
/// [`Builder::POLL`]); dropping the handle stops it too.
#[derive(Debug)]
pub struct Builder {
    stop: Arc<std::sync::atomic::AtomicBool>,
    /// The store's count of running builders (decremented on drop).
    running: Arc<std::sync::atomic::AtomicUsize>,
    signal: Arc<BuildSignal>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Builder {
    /// How often an idle builder checks that its store still exists.
    const POLL: Duration = Duration::from_millis(250);

    /// Starts the builder of `store`; it first builds whatever a previous run of the
    /// node left pending (a kill -9 during a build).
    pub fn start(store: &Arc<Store>) -> Builder {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let signal = store.build_signal.clone();
        let weak: Weak<Store> = Arc::downgrade(store);
        let (stop2, signal2) = (stop.clone(), signal.clone());
        let running = store.builders.clone();
        running.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        signal.notify();
        // The builds' data-parallel steps (chunk trees, FFTs: rayon in dpor-core) run
        // in a pool of one thread of their own, not in rayon's global pool: there a
        // foreground write's few parallel jobs queue behind a C build's long ones
        // (159 ms writes beside a 32 MiB C build, against a 100 ms target). Background
        // work gets one core; the requests keep the others.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).thread_name(|_| "dpor-builder-pool".into()).build().ok();
        let thread = std::thread::Builder::new()
            .name("dpor-builder".into())
            .spawn(move || {
                while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                    if !signal2.wait(Self::POLL) {
                        if weak.strong_count() == 0 {
                            return;
                        }
                        continue;
                    }
                    let Some(store) = weak.upgrade() else { return };
                    store.empty_trash();
                    let built = match &pool {
                        Some(pool) => pool.install(|| store.build_deferred()),
                        None => store.build_deferred(),
                    };
                    if built > 0 {
                        tracing::debug!(built, "deferred runs built");
                    }
                }
                // Stopped: what garbage collection handed over is deleted now.
                if let Some(store) = weak.upgrade() {
                    store.empty_trash();
                }
            })
            .ok();
        Builder { stop, running, signal, thread }
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        self.running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.signal.notify();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Store {
    /// Whether a run of `size` coded blocks is built in the background.
    pub(crate) fn defers(&self, size: u64) -> bool {
        self.config.defer_from_blocks.is_some_and(|min| size >= min)
    }

    /// Builds every deferred run of every deal (the background builder's work).
    /// Returns how many runs it built; errors are logged (the run stays pending and the
    /// operation that needs it builds it, or reports the error).
    pub fn build_deferred(&self) -> usize {
        let deals: Vec<(u64, Arc<Deal>)> = rlock(&self.deals).iter().map(|(id, d)| (*id, d.clone())).collect();
        let mut built = 0;
        for (id, entry) in deals {
            loop {
                let step = {
                    let mut finished = lock(&entry.builds);
                    self.build_next(&entry, &mut finished)
                };
                match step {
                    Ok(true) => built += 1,
                    Ok(false) => break,
                    Err(e) => {
                        tracing::warn!(deal = id, "deferred build failed (retried when needed): {e}");
                        break;
                    }
                }
                let _op = lock(&entry.op);
                let mut finished = lock(&entry.builds);
                if let Err(e) = self.commit_built(&entry, &mut finished) {
                    tracing::warn!(deal = id, "committing a deferred build failed (retried when needed): {e}");
                    break;
                }
            }
        }
        built
    }

    /// Builds every deferred run of `deal` now and commits their roots (what an
    /// operation that needs the current state's roots calls first).
    ///
    /// Errors: [`StoreError::UnknownDeal`], and any error of the build
    /// ([`StoreError::Io`], [`StoreError::Corrupt`], [`StoreError::DiskFull`]).
    pub fn settle(&self, deal: u64) -> Result<()> {
        let entry = self.deal(deal)?;
        if !self.has_builds(&entry) {
            return Ok(());
        }
        let _op = lock(&entry.op);
        self.settle_locked(&entry)
    }

    /// [`Store::settle`] if `run` is one of `deal`'s deferred builds.
    pub(crate) fn ensure_built(&self, deal: u64, run: RunId) -> Result<()> {
        let entry = self.deal(deal)?;
        let building = rlock(&entry.state).as_ref().is_some_and(|st| st.meta.is_building(run));
        if building {
            let _op = lock(&entry.op);
            self.settle_locked(&entry)?;
        }
        Ok(())
    }

    fn has_builds(&self, entry: &Deal) -> bool {
        rlock(&entry.state).as_ref().is_some_and(|st| !st.meta.building.is_empty())
    }

    /// [`Store::settle`] with the deal's mutation lock held by the caller.
    pub(crate) fn settle_locked(&self, entry: &Deal) -> Result<()> {
        if !self.has_builds(entry) {
            return Ok(());
        }
        let mut finished = lock(&entry.builds);
        while self.build_next(entry, &mut finished)? {}
        self.commit_built(entry, &mut finished)
    }

    /// Builds the oldest pending run not yet in `finished` (run files written and
    /// fsynced) and records its root there. Returns false if none is left. Holds no
    /// lock of the deal's state while it computes.
    fn build_next(&self, entry: &Deal, finished: &mut BTreeMap<RunId, B256>) -> Result<bool> {
        let started = std::time::Instant::now();
        let job = {
            let g = rlock(&entry.state);
            let Some(st) = g.as_ref() else { return Ok(false) };
            let Some(job) = st.meta.building.iter().find(|b| !finished.contains_key(&b.run)).cloned() else {
                return Ok(false);
            };
            (job, st.dir.clone(), st.format, st.meta.params)
        };
        let (Build { run, inputs }, dir, format, params) = job;
        let (n, width) = (params.num_blocks, format.width());
        let k = n.trailing_zeros();
        let mut blocks: Vec<Fp> = match &inputs {
            BuildInputs::Level { t, index, block, consumed } => {
                let record = format.record(*index, block)?;
                let mut levels = Vec::with_capacity(consumed.len());
                for (j, id) in consumed.iter().enumerate() {
                    levels.push(runs::read_elements(&dir, *id, &format, 2u64 << j)?);
                }
                let refs: Vec<&[Fp]> = levels.iter().map(|v| v.as_slice()).collect();
                code::h_add(*t, k, &record, &refs, width)?
            }
            BuildInputs::C => {
                let beta = params.block_bytes as u64;
                let u = UFiles::open(&dir, n, beta, &self.u_open)?;
                let per = (MAX_READ_BYTES / beta.max(1)).max(1);
                let mut all = Vec::with_capacity(n as usize);
                let mut start = 0;
                while start < n {
                    let count = per.min(n - start);
                    all.extend(u.read_blocks(start, count)?);
                    start += count;
                }
                // After reading U: every block overwritten since the C-rebuild has its
                // saved value in the snapshot file, synced and counted before the
                // overwrite, so the count read now covers every overwrite seen above.
                let count = rlock(&entry.state).as_ref().map_or(0, |st| st.meta.snapshot_records);
                for (index, block) in snapshot::read(&dir, n, beta, count, true)? {
                    if let Some(slot) = all.get_mut(index as usize) {
                        *slot = block;
                    }
                }
                let records = u_records(&format, &all)?;
                drop(all);
                code::c_rebuild(&records, k, width)?
            }
        };
        let size = (blocks.len() / width.max(1)) as u64;
        self.ensure_space(runs::run_disk_bytes(&format, size))?;
        self.apply_commit_fault(run, &mut blocks, width);
        let root = runs::write_run_paced(&dir, run, &format, &blocks, runs::Pace::Background)?;
        self.keep_written(params.deal, run, root, blocks);
        finished.insert(run, root);
        self.rebuilt(run, started.elapsed());
        Ok(true)
    }

    /// Commits the roots of the runs in `finished` (those still pending) in one flushed
    /// sled write, with the snapshot blocks deleted once the C build is done. The caller
    /// holds the deal's mutation lock.
    fn commit_built(&self, entry: &Deal, finished: &mut BTreeMap<RunId, B256>) -> Result<()> {
        if finished.is_empty() {
            return Ok(());
        }
        let mut g = wlock(&entry.state);
        let Some(st) = g.as_mut() else { return Ok(()) };
        let mut new = st.meta.clone();
        let mut any = false;
        for (run, root) in finished.iter() {
            let Some(pos) = new.building.iter().position(|b| b.run == *run) else { continue };
            let job = new.building.remove(pos);
            any = true;
            if job.inputs == BuildInputs::C {
                // The snapshot's records no longer count; its file stays, for the next
                // C build to write over.
                new.snapshot_records = 0;
            }
            fill_root(&mut new, *run, *root);
        }
        finished.clear();
        if !any {
            return Ok(());
        }
        self.commit(&new, Some(&st.meta), sled::Batch::default())?;
        st.meta = new;
        if st.meta.snapshot_records == 0 {
            st.snapshot_saved.clear();
        }
        self.gc(&st.meta, &st.dir, false);
        Ok(())
    }
}

/// Sets the root of `run` wherever the record names it with a zero root.
pub(crate) fn fill_root(m: &mut meta::DealMeta, run: RunId, root: B256) {
    if let Some((id, r)) = m.c.as_mut() {
        if *id == run {
            *r = root;
        }
    }
    for (_, id, r) in m.levels.iter_mut() {
        if *id == run {
            *r = root;
        }
    }
    for (id, _, r) in m.previous.iter_mut() {
        if *id == run {
            *r = root;
        }
    }
    if let Some((_, meta::LastAnswer::WrittenBatch(b))) = m.last_answer.as_mut() {
        for (id, r) in b.runs.iter_mut() {
            if *id == run {
                *r = root;
            }
        }
    }
}
