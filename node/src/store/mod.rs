//! The node's on-disk storage engine: U, C and H of every deal, their Merkle trees,
//! the owner's σ̃, and the pinned digests, crash-safe and quota-aware.
//!
//! [`Store`] holds the same state as the reference [`dpor_core::state::ServerState`]
//! (tests compare them after every operation), on disk.
//!
//! # On-disk layout
//!
//! ```text
//! <dir>/meta.sled                         sled: metadata (one record per deal, σ̃ of runs)
//! <dir>/deals/<deal>/u.blocks             N·β bytes: U in index order, overwritten in place
//! <dir>/deals/<deal>/u.sealed             N·32 bytes: σ̃_U(i)
//! <dir>/deals/<deal>/u.roots              N·32 bytes: block root of U[i] (the U tree is
//!                                         rebuilt from these on open, without rehashing U)
//! <dir>/deals/<deal>/run-<tag>-<t>.blocks immutable: a run's coded blocks, size·8s bytes
//!                                         (tag 0 = C, ℓ+1 = level ℓ; t = total writes
//!                                         when it was built)
//! <dir>/deals/<deal>/run-<tag>-<t>.tree   immutable: every layer of the run's tree,
//!                                         leaves first, (2·size − 1)·32 bytes
//! ```
//!
//! sled keys: `'d' ‖ u64be(deal)` → the deal record ([`meta`]: parameters, phase, last
//! nonce, t, rebuild count, root U, the manifest of live runs (C and filled levels with
//! their roots), the co-signed, posted and disputed digests, and the pending U update);
//! `'s' ‖ u64be(deal) ‖ u32be(tag) ‖ u64be(built_at) ‖ u64be(pos)` → σ̃ of a run position.
//!
//! # Commit protocol (a write, Write(i, B) of §5.4)
//!
//! 1. Validate (phase, nonce, index, β) and check space (quota and file system).
//! 2. Compute the new run as `ServerState::write` does: `h_add` over the consumed levels
//!    read back from their run files, or on the N-th write `c_rebuild` of all of U with
//!    U[i] = B. Readers are not blocked meanwhile.
//! 3. Write the run's `.blocks` and `.tree` under `.tmp` names, fsync, rename, fsync the
//!    directory. Failure (ENOSPC included): the files are removed, nothing changed.
//! 4. One sled write of the deal record with the new counters, nonce, manifest, root U,
//!    the write's answer (kept for `Request::Outcome`), the previous state's runs (kept
//!    until the owner confirms) and a *pending U update* (i, B, σ̃), then `flush`. **This is the commit and the
//!    acknowledgement point.**
//! 5. Apply the pending update to `u.blocks`, `u.sealed`, `u.roots` (pwrite + fsync),
//!    then clear it (idempotent: re-applied on open if a crash came first).
//!
//! A batch of writes ([`Store::write_batch`], `batch.rs`) follows the same steps once for
//! the whole batch: the writes are applied in order in memory, only the runs of the
//! final state that the batch built are written (step 3), one sled flush commits it
//! with one pending U update per distinct index (step 4), applied with one fsync per
//! U file (step 5).
//!
//! 6. Garbage-collect: delete the run files (and their σ̃) referenced by none of: the
//!    current state, the state before the last write until the owner confirms it
//!    (its next accepted request), the latest co-signed digest, the latest posted
//!    digest, the digest of any open dispute.
//!
//! Uploads, σ̃ stores and digest pins follow the same rule: data files first (durable),
//! then one flushed sled write that references them. On [`Store::open`]: pending U
//! updates are re-applied, the U trees rebuilt from `u.roots` + `u.sealed`, and every
//! run file, `.tmp` file, σ̃ entry and deal folder that no record references is deleted.
//! So after a kill -9 at any point the state is the last acknowledged one (or the one
//! being committed, if the sled flush completed), and every run of the posted digest
//! is on disk.
//!
//! # Space
//!
//! Before it allocates, an operation checks that the bytes it needs fit both the
//! configured quota ([`StoreConfig::quota_bytes`], against [`Store::disk_usage`]) and
//! the file system's free space; otherwise [`StoreError::DiskFull`] and nothing
//! changes. U's files are allocated in full (`fallocate`) when an upload begins, so
//! later in-place writes need no new space. A real ENOSPC during an operation is
//! reported the same way, after removing what it wrote.
//!
//! # Concurrency
//!
//! [`Store`] is `Send + Sync`. Mutations of one deal are serialized by a per-deal
//! mutex; each deal's committed state sits behind a read-write lock that a mutation
//! takes for writing only around the commit (steps 4–6), so reads run concurrently
//! with a write's computation and see the state before or after it, never a mix.

mod batch;
mod codec;
mod deferred;
mod digests;
mod error;
mod fault;
mod fsync;
mod gc;
mod handles;
mod meta;
mod read;
mod responses;
mod recovery;
mod resize;
mod run_cache;
mod runs;
mod sealed;
mod snapshot;
mod spares;
mod space;
mod stats;
mod u;
mod upload;
mod upload_stream;
mod write;

pub use batch::BatchWrite;
pub use handles::DEFAULT_OPEN_U_DEALS;
pub use run_cache::DEFAULT_RUN_CACHE_BYTES;
pub use upload_stream::DEFAULT_UPLOAD_STREAM_BYTES;
pub use deferred::Builder;
pub use read::ULeafPath;
pub use error::StoreError;
pub use fault::CommitFault;
pub use meta::{CosignKind, CosignRecord, DealParams, LastAnswer, Phase, MAX_UNPOSTED_COSIGNS};
pub use recovery::open_metadata_db;
pub use stats::{RebuildObserver, SpaceReport};

use alloy_primitives::B256;
use dpor_core::block::BlockFormat;
use dpor_core::digest::Digest;
use dpor_core::merkle::MerkleTree;
use dpor_core::state::{RunId, WriteStep};
use dpor_core::RunTag;
use error::Result;
use meta::DealMeta;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use u::UFiles;

/// Largest number of bytes one range read returns (256 MiB); a larger request is
/// [`StoreError::Range`]. Callers enforce their own, smaller message limits.
pub const MAX_READ_BYTES: u64 = 256 << 20;

/// Store configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreConfig {
    /// Most bytes the store may occupy on disk ([`Store::disk_usage`]); `None` for no
    /// limit but the file system's.
    pub quota_bytes: Option<u64>,
    /// Deamortized rebuilds (§6.1, `deferred.rs`): a write that would build a run of at
    /// least this many coded blocks (a level ℓ with 2^(ℓ+1) ≥ it, or C with 2N ≥ it)
    /// is acknowledged before the run is built; the run is built in the background
    /// ([`Builder`]) or when first needed. `None`: every run is built inside its write.
    pub defer_from_blocks: Option<u64>,
    /// Most deals whose U files (three per deal) are open at once; the deal opened
    /// longest ago is closed first and reopened when next used (`handles.rs`). `None`:
    /// [`DEFAULT_OPEN_U_DEALS`] (1,024 deals, 3,072 files).
    pub open_u_deals: Option<usize>,
    /// Bytes of field elements (8 per element) the store keeps in memory of the levels
    /// it wrote last, for the write that consumes them (`run_cache.rs`); `None`:
    /// [`DEFAULT_RUN_CACHE_BYTES`] (256 MiB); `Some(0)` keeps none.
    pub run_cache_bytes: Option<u64>,
    /// Bytes of memory (16·N·width per upload) the store may hold at once to build the
    /// C of uploads while their blocks arrive (`upload_stream.rs`, issue 23); an upload
    /// that does not fit builds C at the end from U read back. `None`:
    /// [`DEFAULT_UPLOAD_STREAM_BYTES`] (2 GiB); `Some(0)`: never while they arrive.
    pub upload_stream_bytes: Option<u64>,
    /// Longest an upload request that arrives before the one it follows waits for it
    /// ([`Store::upload_blocks`]); `None`: [`upload::UPLOAD_TURN_WAIT`] (60 s).
    pub upload_turn_wait: Option<std::time::Duration>,
}

/// A snapshot of one deal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DealView {
    /// Fixed parameters.
    pub params: DealParams,
    /// Uploading or live.
    pub phase: Phase,
    /// The last accepted owner nonce (0 if none).
    pub last_nonce: u64,
    /// t: writes since the last C-rebuild (0 ≤ t < N).
    pub write_count: u64,
    /// C-rebuilds so far.
    pub rebuild_count: u64,
    /// Root of the U tree (zero while uploading).
    pub root_u: B256,
    /// C: its id and root (`(C@0, zero)` while uploading).
    pub c: (RunId, B256),
    /// Filled levels of H ascending: (level ℓ, run id, root).
    pub levels: Vec<(u32, RunId, B256)>,
    /// The latest co-signed digest.
    pub cosigned: Option<Digest>,
    /// The latest posted digest.
    pub posted: Option<Digest>,
    /// Ids of the open disputes whose digests are pinned, ascending.
    pub disputes: Vec<u64>,
    /// The runs of the state before the last write, kept (files and σ̃) until the
    /// owner's next accepted request shows it has the write's answer (see
    /// docs/ARCHITECTURE.md, "Garbage collection"); empty once confirmed.
    pub previous: Vec<RunId>,
    /// Epochs whose digest in force is pinned until they settle ([`Store::pin_epoch`]), ascending.
    pub epoch_pins: Vec<u64>,
    /// Why the deal is quarantined, if it is: the damage [`Store::open`] found in its
    /// files (U files missing, short or unreadable; a current run's file missing or
    /// short). A quarantined deal serves what is intact (coded runs, σ̃, status; U too
    /// unless U is the damaged part) and refuses owner writes and resizes
    /// ([`StoreError::Damaged`]); `None` for a healthy deal.
    pub damaged: Option<String>,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// HAdd into a level, or a C-rebuild.
    pub step: WriteStep,
    /// The run it built.
    pub run: RunId,
    /// That run's root.
    pub run_root: B256,
    /// The new root of U.
    pub root_u: B256,
}

/// What a batch of writes did ([`Store::write_batch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Writes in the batch.
    pub count: u64,
    /// The new root of U.
    pub root_u: B256,
    /// The runs the batch built that the new state holds, with their roots: C first if
    /// the batch crossed a C-rebuild, then levels ascending. (Runs built and consumed
    /// inside the batch are never stored.)
    pub runs: Vec<(RunId, B256)>,
}

/// The committed state of one deal in memory.
#[derive(Debug)]
pub(crate) struct DealState {
    meta: DealMeta,
    format: BlockFormat,
    dir: PathBuf,
    /// U's files; `None` for a deal quarantined because they are damaged.
    u: Option<UFiles>,
    /// The U tree (live deals only).
    u_tree: Option<MerkleTree>,
    /// Why the deal is quarantined ([`DealView::damaged`]), `None` if it is not.
    damaged: Option<String>,
    /// The block roots of `meta.pending`'s blocks, in order, when the batch that left
    /// them hashed them already, with that batch's nonce (memory only: without it, or
    /// if the deal's last nonce is another, they are hashed again).
    pending_roots: Option<(u64, Vec<B256>)>,
    /// The indices of U whose blocks the pending C build's snapshot file holds (the
    /// first `meta.snapshot_records` records, `snapshot.rs`): a later write of one of
    /// them must not save it again (U no longer holds the value as of the C-rebuild).
    snapshot_saved: std::collections::BTreeSet<u64>,
}

/// One deal: a mutation lock and the committed state (`None`: no such deal yet).
#[derive(Debug, Default)]
pub(crate) struct Deal {
    op: Mutex<()>,
    state: RwLock<Option<DealState>>,
    /// Deferred runs built but not yet committed (`deferred.rs`); held while building.
    builds: Mutex<BTreeMap<RunId, B256>>,
    /// C being built while the upload's blocks arrive (`upload_stream.rs`); memory only.
    upload_stream: Mutex<Option<upload_stream::UploadStream>>,
    /// Upload requests that arrived before their predecessor wait on this (with `op`)
    /// for their turn (`upload.rs`, [`upload::UPLOAD_TURN_WAIT`]).
    upload_turn: std::sync::Condvar,
    /// Bumped when an upload begins again or a request of it fails: a request waiting
    /// for its turn then stops waiting.
    upload_epoch: std::sync::atomic::AtomicU64,
    /// Whether a request of this deal waits for its turn (at most one does).
    upload_waiting: std::sync::atomic::AtomicBool,
}

/// The storage engine (see the module docs). `Send + Sync`.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    config: StoreConfig,
    db: sled::Db,
    deals: RwLock<BTreeMap<u64, Arc<Deal>>>,
    /// Testing only: wrong coded blocks to commit ([`fault`]).
    commit_fault: Mutex<Option<CommitFault>>,
    /// Wakes the background builder ([`Builder`]).
    build_signal: Arc<deferred::BuildSignal>,
    /// Background builders running on this store (0 or 1 in practice): while one runs,
    /// garbage collection hands unreferenced runs to it ([`gc::Trash`]).
    builders: Arc<std::sync::atomic::AtomicUsize>,
    /// Unreferenced runs waiting for the background builder to delete them.
    trash: Mutex<Vec<gc::Trash>>,
    /// The deals whose U files are open ([`StoreConfig::open_u_deals`]).
    u_open: Arc<handles::OpenDeals<u::Handles>>,
    /// Told of every deferred run built (metrics; `stats.rs`).
    rebuild_observer: stats::ObserverSlot,
    /// Levels written last, in memory for the write that consumes them (`run_cache.rs`).
    run_cache: run_cache::RunCache,
    /// Bytes the upload streams hold ([`StoreConfig::upload_stream_bytes`]).
    upload_streams_used: Arc<std::sync::atomic::AtomicU64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn rlock<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn wlock<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

impl DealState {
    fn view(&self) -> DealView {
        let m = &self.meta;
        DealView {
            params: m.params,
            phase: m.phase,
            last_nonce: m.last_nonce.unwrap_or(0),
            write_count: m.write_count,
            rebuild_count: m.rebuild_count,
            root_u: m.root_u,
            c: m.c.unwrap_or((RunId { tag: RunTag::C, built_at: 0 }, B256::ZERO)),
            levels: m.levels.clone(),
            cosigned: m.cosigned.clone(),
            posted: m.posted.clone(),
            disputes: m.disputes.iter().map(|(id, _)| *id).filter(|id| id & digests::EPOCH_PIN == 0).collect(),
            previous: m.previous.iter().map(|(id, _, _)| *id).collect(),
            epoch_pins: m
                .disputes
                .iter()
                .map(|(id, _)| *id)
                .filter(|id| id & digests::EPOCH_PIN != 0)
                .map(|id| id & !digests::EPOCH_PIN)
                .collect(),
            damaged: self.damaged.clone(),
        }
    }

    /// The quarantine error of this deal (the reason [`Store::open`] found).
    fn quarantined(&self) -> StoreError {
        StoreError::Damaged {
            deal: self.meta.params.deal,
            reason: self.damaged.clone().unwrap_or_else(|| "its U files are not open".into()),
        }
    }

    /// U's files, or [`StoreError::Damaged`] if the deal is quarantined for damaged U.
    fn u(&self) -> Result<&UFiles> {
        self.u.as_ref().ok_or_else(|| self.quarantined())
    }

    /// The U tree: [`StoreError::Damaged`] if U is quarantined, [`StoreError::Corrupt`]
    /// if the deal has none otherwise.
    fn u_tree(&self) -> Result<&MerkleTree> {
        self.u()?;
        self.u_tree.as_ref().ok_or_else(|| StoreError::Corrupt(format!("deal {}: no U tree", self.meta.params.deal)))
    }

    /// [`StoreError::Damaged`] if the deal is quarantined: what an owner write or a
    /// resize checks first (it would build on, or over, data the node lost).
    fn require_intact(&self) -> Result<()> {
        match self.damaged {
            Some(_) => Err(self.quarantined()),
            None => Ok(()),
        }
    }

    fn require_live(&self) -> Result<()> {
        match self.meta.phase {
            Phase::Live => Ok(()),
            Phase::Uploading { received } => Err(StoreError::Phase(format!(
                "deal {} is still uploading ({received} of {} blocks)",
                self.meta.params.deal,
                self.meta.num_blocks()
            ))),
        }
    }
}

impl Store {
    /// Whether a background [`Builder`] is running on this store.
    fn builder_running(&self) -> bool {
        self.builders.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    /// The deals folder.
    fn deals_dir(&self) -> PathBuf {
        self.dir.join("deals")
    }

    /// The folder of one deal.
    fn deal_dir(&self, deal: u64) -> PathBuf {
        self.deals_dir().join(deal.to_string())
    }

    /// The deal entry, or [`StoreError::UnknownDeal`].
    fn deal(&self, deal: u64) -> Result<Arc<Deal>> {
        rlock(&self.deals).get(&deal).cloned().ok_or(StoreError::UnknownDeal(deal))
    }

    /// Runs `f` on the committed state of `deal` under its read lock.
    fn with_state<T>(&self, deal: u64, f: impl FnOnce(&DealState) -> Result<T>) -> Result<T> {
        let d = self.deal(deal)?;
        let guard = rlock(&d.state);
        match guard.as_ref() {
            Some(st) => f(st),
            None => Err(StoreError::UnknownDeal(deal)),
        }
    }

    /// Writes a deal record durably (the commit point); if the flush fails, tries to
    /// put `old` back so that memory and disk agree.
    fn commit(&self, meta: &DealMeta, old: Option<&DealMeta>, mut batch: sled::Batch) -> Result<()> {
        let key = meta::deal_key(meta.params.deal);
        batch.insert(&key[..], meta.encode());
        self.db.apply_batch(batch)?;
        if let Err(e) = self.db.flush() {
            let _ = match old {
                Some(o) => self.db.insert(key, o.encode()).map(|_| ()),
                None => self.db.remove(key).map(|_| ()),
            };
            return Err(e.into());
        }
        Ok(())
    }

    /// Commits `new`, the record of a step that wrote the run files `runs`, as the
    /// state of `st`; if the commit fails, deletes those files (no record names them)
    /// and returns the error, leaving `st` as it was.
    fn commit_runs(
        &self,
        st: &mut DealState,
        new: DealMeta,
        batch: sled::Batch,
        runs: impl IntoIterator<Item = RunId>,
    ) -> Result<()> {
        if let Err(e) = self.commit(&new, Some(&st.meta), batch) {
            for run in runs {
                runs::remove_run(&st.dir, run);
            }
            return Err(e);
        }
        st.meta = new;
        Ok(())
    }

    /// Opens (creating if needed) the store in `dir` and recovers it: pending U updates
    /// are re-applied, and files no record references are deleted.
    ///
    /// A lock on the metadata database that a just-dropped store still holds is waited
    /// for, at most 10 s ([`open_metadata_db`]).
    ///
    /// Errors: [`StoreError::Io`] if the folder cannot be created or read,
    /// [`StoreError::Sled`] if the metadata database cannot be opened (or stays locked
    /// by another process),
    /// [`StoreError::Corrupt`] if a deal record or a U file is unreadable.
    pub fn open(dir: &Path, config: StoreConfig) -> Result<Store> {
        recovery::open(dir, config)
    }

    /// Deals whose U files are open now: at most [`StoreConfig::open_u_deals`], plus
    /// any closed while an operation still held them.
    pub fn open_u_deals(&self) -> usize {
        self.u_open.open_count()
    }

    /// The ids of all deals (uploading or live), ascending.
    pub fn deals(&self) -> Vec<u64> {
        rlock(&self.deals)
            .iter()
            .filter(|(_, d)| rlock(&d.state).is_some())
            .map(|(id, _)| *id)
            .collect()
    }

    /// A snapshot of `deal`. Errors: [`StoreError::UnknownDeal`].
    pub fn view(&self, deal: u64) -> Result<DealView> {
        self.with_state(deal, |st| Ok(st.view()))
    }

    /// Bytes the store occupies on disk (all files under its folder, metadata
    /// included), for "disk bytes per file byte" and the quota.
    ///
    /// Errors: [`StoreError::Io`] if the folder cannot be listed.
    pub fn disk_usage(&self) -> Result<u64> {
        space::usage(&self.dir)
    }
}
