//! The owner's state: a small JSON document (DESIGN §1: "a 32-byte secret seed, its
//! Ethereum key, a few counters and roots, an optional cache of the smallest levels").
//!
//! It holds the secret seed the checksum keys derive from (so it is written with mode
//! 0600), the deal's shape, the roots the owner has verified, the write counter, the
//! last nonce it used with the node, the last digest version it posted, and the
//! checksums σ of the filled levels up to `cache_levels` (levels above are fetched
//! from the node as σ̃ when a rebuild consumes them). Saved atomically after every
//! operation that changes it, in place into the older of the file's two slots with
//! `fdatasync` (`slots`; the first save of a file by temp file, fsync, rename and
//! fsync of the folder).
//!
//! **Intent.** Before the owner sends a request whose answer changes its state (a
//! write, the upload's finish), it saves the request as [`Pending`] in this file, and
//! the checksums σ the answer must be checked against in a sidecar
//! `<state>.sigma.<name>`, or inside the state file when small
//! ([`OwnerState::stash_sigma`]); after checking the answer it commits
//! the new state and clears the intent in one save. A crash (of the owner, the node
//! or the connection) at any point thus leaves either the old state with an intent,
//! which the next command resolves with the node (`owner::recover`), or the new one.

use crate::owner::local_levels::{LocalLevel, LocalLevels};
use alloy_primitives::{Address, B256};
use anyhow::Context;
use dpor_core::checksum::{OwnerKeys, RHO};
use dpor_core::field::{self, Fp};
use dpor_core::{merkle, BlockFormat};
use dpor_proto::messages::WireRun;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod sigma_files;
mod slots;
pub use slots::read_json;
pub use sigma_files::sidecars as sigma_sidecars;

/// Default number of smallest levels whose checksums the owner caches: levels
/// 0..15, at most 2^17·16 bytes = 2 MiB of checksums (N ≤ 2^16 files need no σ̃
/// fetches at all).
pub const DEFAULT_CACHE_LEVELS: u32 = 16;

/// One filled run the owner has verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEntry {
    /// Its name.
    pub run: WireRun,
    /// Its Merkle root, as committed by the node and spot-checked.
    pub root: B256,
    /// Its checksums σ (size × ρ canonical values), if cached. Saved in the checksum
    /// sidecar [`RunEntry::sigma_file`], never in the JSON (state files of older
    /// versions, which held them inline, still load).
    #[serde(default, skip_serializing)]
    pub sigma: Option<Vec<u64>>,
    /// The checksum sidecar `<state>.sigma.<name>` holding [`RunEntry::sigma`], once
    /// written (`None` while the σ are in memory only; [`OwnerState::save`] writes them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma_file: Option<String>,
    /// Built by a batch of writes whose check is deferred (issue 11 #2): the root is
    /// the node's, not yet spot-checked or recomputed. The owner checks it before it
    /// signs a digest that references it ([`crate::owner::flows::verify_deferred`]).
    /// Absent (false) in state files written before batches existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchecked: bool,
}

/// One write of a [`Pending::WriteBatch`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingWrite {
    /// Block index.
    pub index: u64,
    /// The block, β bytes. Left out of the JSON when the intent's blocks are in the
    /// recent-writes sidecar (`blocks_in_recent`), and filled from it on load.
    #[serde(default, skip_serializing_if = "<[u8]>::is_empty")]
    pub block: alloy_primitives::Bytes,
    /// Its σ̃_U.
    pub sealed_u: B256,
}

/// The checksums σ_U(i) as of a C-rebuild of the blocks written since: block index →
/// ρ canonical field values ([`OwnerState::c_snapshot`]).
pub type CSnapshot = std::collections::BTreeMap<u64, Vec<u64>>;

/// [`CSnapshot`] in JSON as a list of `[index, σ]` pairs: a map with integer keys
/// would become string keys, which serde cannot read back inside the internally
/// tagged [`Pending`] (it buffers the content and no longer converts "0" to 0).
mod snapshot_pairs {
    use super::CSnapshot;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<CSnapshot>, s: S) -> Result<S::Ok, S::Error> {
        v.as_ref().map(|m| m.iter().collect::<Vec<_>>()).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<CSnapshot>, D::Error> {
        Ok(Option::<Vec<(u64, Vec<u64>)>>::deserialize(d)?.map(|v| v.into_iter().collect()))
    }
}

/// An owner request sent (or about to be sent) whose outcome is not yet in the state,
/// or a step still to finish (see the module docs and `owner::recover`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Pending {
    /// Write(i, B) with `nonce`: the node's answer must give `new_root_u` and build
    /// `run`, whose checksums are in the sidecar.
    Write {
        /// Its nonce.
        nonce: u64,
        /// Block index.
        index: u64,
        /// The block, β bytes (to send it again if the node never got it).
        block: alloy_primitives::Bytes,
        /// Its σ̃_U.
        sealed_u: B256,
        /// rootU after the write, as the owner computed it.
        new_root_u: B256,
        /// The run the write must build.
        run: WireRun,
        /// [`OwnerState::c_snapshot`] once the write is committed, when C is still
        /// unchecked (a batch crossed a C-rebuild) and the write does not rebuild C
        /// itself: the snapshot with σ_U(index) as of that C-rebuild added.
        #[serde(default, skip_serializing_if = "Option::is_none", with = "snapshot_pairs")]
        c_snapshot: Option<CSnapshot>,
        /// Set when the node's answer failed verification: the node misbehaved, and
        /// the owner stays on its previous state (the node must keep its runs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rejected: Option<String>,
    },
    /// A batch of writes with `nonce` (issue 11 #1): the node's answer must give
    /// `new_root_u` and name exactly `runs` (the runs of the new state the batch
    /// builds), whose checksums are in the sidecar.
    WriteBatch {
        /// Its nonce.
        nonce: u64,
        /// The writes in order (to send them again if the node never got them).
        writes: Vec<PendingWrite>,
        /// rootU after the batch, as the owner computed it.
        new_root_u: B256,
        /// The runs the batch must build that the new state holds (C first, then levels ascending).
        runs: Vec<WireRun>,
        /// The file's length in bytes once the batch is committed, when the batch
        /// changes it (a byte-range write past the end, a sync: `owner::edit`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file_bytes: Option<u64>,
        /// [`OwnerState::c_snapshot`] once the batch is committed.
        #[serde(default, skip_serializing_if = "Option::is_none", with = "snapshot_pairs")]
        c_snapshot: Option<CSnapshot>,
        /// As for [`Pending::Write`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rejected: Option<String>,
        /// When the writes' blocks are in the recent-writes sidecar under the numbers
        /// total_writes + 1, … ([`OwnerState::record_recent`], made durable before this
        /// intent), not in the JSON: keccak256 of their block roots in order
        /// ([`merkle::block_roots`]), which [`OwnerState::load`] checks as it puts them
        /// back (a resent batch is thus the one the owner prepared, byte for byte).
        /// `None` in older files and when the owner keeps no block cache.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recent_blocks: Option<B256>,
    },
    /// UploadFinish with `nonce`: the node must commit `root_u` and C@0, whose
    /// checksums are in the sidecar.
    UploadFinish {
        /// Its nonce.
        nonce: u64,
        /// rootU of the uploaded blocks.
        root_u: B256,
        /// The file's length in bytes.
        file_bytes: u64,
        /// As for [`Pending::Write`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rejected: Option<String>,
    },
    /// Resize to `num_blocks` with `nonce` (App. A.3): the node's answer must give
    /// `new_root_u` and build `run` (C for the new N), whose checksums are in the sidecar.
    Resize {
        /// Its nonce.
        nonce: u64,
        /// N', blocks.
        num_blocks: u64,
        /// rootU after the resize, as the owner computed it.
        new_root_u: B256,
        /// The C the resize must build.
        run: WireRun,
        /// As for [`Pending::Write`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rejected: Option<String>,
    },
    /// The state is committed, but the σ̃ of `run` (checksums in the sidecar) are
    /// stored on the node only below position `next`.
    StoreSealed {
        /// The run.
        run: WireRun,
        /// First position not yet acknowledged.
        next: u64,
        /// Further runs whose σ̃ go to the node after this one (a batch), all from
        /// position 0; their checksums are in the sidecar too.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        more: Vec<WireRun>,
    },
}

/// A write the owner remembers for its cache of the smallest levels' blocks (App. A.1):
/// (total write number counting from 1, block index, block).
pub type RecentWrite = (u64, u64, Vec<u8>);

/// Magic of the recent-writes sidecar (the owner's block cache, App. A.1).
const RECENT_MAGIC: &[u8; 13] = b"dpor-recent-1";
/// Magic of the append-only recent-writes sidecar as versions before 2026-11-29 wrote
/// it: records as in [`RECENT_MAGIC_3`], each checked by keccak256. Still read; the
/// next save rewrites the file as version 3.
const RECENT_MAGIC_2: &[u8; 13] = b"dpor-recent-2";
/// Magic of the append-only recent-writes sidecar: records (w, i, len, block, BLAKE3
/// of the four), appended as batches add writes, last record per w wins. The check
/// detects torn and damaged records of the owner's own file (nothing adversarial),
/// so it need not be keccak: BLAKE3 hashes a 4 KiB record ≈ 10× faster than
/// `keccak-asm`, and keccak256 of every batched block was ≈ 7 % of the batched
/// writes' CPU (docs/PERFORMANCE.md, "eleventh session").
const RECENT_MAGIC_3: &[u8; 13] = b"dpor-recent-3";

/// Default number of smallest levels whose *blocks* the owner keeps (App. A.1): levels
/// 0..10, at most 2^11 − 1 blocks (8 MiB at β = 4 KiB, in the append-only sidecar).
/// Runs of these levels are recomputed by the owner at checkpoint time instead of
/// being spot-checked: levels below [`crate::owner::batch::HASHED_LEVELS`] hashed
/// whole, the others checked by their leaves (docs/PERFORMANCE.md: 1.14× β + path per
/// batched write at 0.96× the throughput of an 8-level cache, which gives 1.45×).
pub const DEFAULT_BLOCK_CACHE_LEVELS: u32 = 11;

/// The owner's state for one deal.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OwnerState {
    /// The deal id on chain.
    pub deal: u64,
    /// Chain id.
    pub chain_id: u64,
    /// Market contract.
    pub market: Address,
    /// The provider account of the deal.
    pub provider: Address,
    /// The secret seed of the checksum keys (hex). Keep this file private.
    pub seed: B256,
    /// N, blocks.
    pub num_blocks: u64,
    /// β, bytes per block.
    pub block_bytes: u32,
    /// λ, audit and spot-check samples per run.
    pub lambda: u32,
    /// The file's length in bytes (0 before upload).
    pub file_bytes: u64,
    /// The last nonce used with the node.
    pub nonce: u64,
    /// True once the upload is verified.
    pub uploaded: bool,
    /// t, writes since the last C-rebuild.
    pub write_count: u64,
    /// C-rebuilds so far.
    pub rebuild_count: u64,
    /// rootU.
    pub root_u: B256,
    /// C.
    pub c: Option<RunEntry>,
    /// Filled levels of H, by level (index ℓ; `None` when empty).
    pub levels: Vec<Option<RunEntry>>,
    /// Version of the last digest posted.
    pub digest_version: u64,
    /// Levels below this keep their checksums here.
    pub cache_levels: u32,
    /// The unfinished request or step, if any (see [`Pending`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Pending>,
    /// The checksum sidecar `<state>.sigma.<name>` holding the stashed checksums of
    /// the pending runs ([`OwnerState::stash_sigmas`]). `None` in files of older
    /// versions, whose stash is `<state>.sigma`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stash_file: Option<String>,
    /// Levels below this are verified, when a digest references them, by recomputing
    /// them from the owner's copy of their blocks (App. A.1; [`OwnerState::recent`]),
    /// never spot-checked. 0 (the value in older state files) keeps no blocks.
    #[serde(default)]
    pub block_cache_levels: u32,
    /// The writes of the current smallest levels (those below
    /// [`OwnerState::block_cache_levels`]), oldest first, kept in the sidecar
    /// `<state>.recent` ([`OwnerState::record_recent`]: each write is recorded there
    /// before its intent is saved). May be missing or short (an older state, a lost
    /// sidecar): the runs it does not cover are spot-checked. A pending batch's blocks
    /// are only there, so a state with one does not load without them.
    #[serde(skip)]
    pub recent: Vec<RecentWrite>,
    /// What the sidecar holds, when known to be a clean append-only file this process
    /// read or wrote ([`RecentDisk`]). `None` makes the next
    /// [`OwnerState::save_recent`] rewrite it whole. Set to `None` by whoever replaces
    /// entries of [`OwnerState::recent`] under numbers already saved.
    #[serde(skip)]
    pub recent_disk: Option<RecentDisk>,
    /// Set when a run failed its deferred check ([`crate::owner::batch::verify_deferred`]):
    /// the node misbehaved, and the owner signs no digest from then on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferred_failure: Option<String>,
    /// While C's checksums are not computed yet (a batch crossed a C-rebuild; they are
    /// computed when C is checked, [`crate::owner::batch::verify_deferred`]): the
    /// checksums σ_U(i), as of that C-rebuild, of every block i written since (ρ
    /// canonical values each). `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "snapshot_pairs")]
    pub c_snapshot: Option<CSnapshot>,
    /// Where the state is saved ([`OwnerState::persist`]); `None` keeps it in memory
    /// only (tests, benchmarks).
    #[serde(skip)]
    pub path: Option<PathBuf>,
    /// The checksums of the pending runs in memory: (run, size × ρ canonical values).
    #[serde(skip)]
    pub stashed: Vec<(WireRun, Vec<u64>)>,
    /// The owner's copy of its smallest levels, built by batches beside the node's
    /// work and taken by checkpoints instead of a replay (memory only; a cache that
    /// names the state it belongs to: [`crate::owner::local_levels`]).
    #[serde(skip)]
    pub local_levels: Option<LocalLevels>,
    /// The checksum sidecars small enough to live inside the state file
    /// (`sigma_files::INLINE_MAX_VALUES`), by name: written with the state's JSON at
    /// every save (only those the state names), read back by [`OwnerState::load`].
    #[serde(skip)]
    inline_sigma: sigma_files::Inline,
    /// A committed batch whose save was left to the next one
    /// ([`OwnerState::defer_save`]): the file still holds the batch's intent.
    #[serde(skip)]
    unsaved: bool,
}

/// The block cache's sidecar `<state>.recent` as this process knows it: its records,
/// then zeros (space written ahead, so that an append overwrites allocated blocks of a
/// file whose size does not change: its `fdatasync` is a data write and a cache flush,
/// not a file-system journal commit; issue 23, the write max).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecentDisk {
    /// Records in the file.
    pub records: u64,
    /// The highest write number appended.
    pub through: u64,
    /// Where the records end, in bytes: the next one is written there.
    pub end: u64,
    /// The file's length in bytes (the records, then zeros).
    pub len: u64,
}

/// The zeros written ahead after the last record of the block cache's sidecar when it
/// is rewritten or must grow, in bytes: about 250 single writes of 4 KiB blocks.
const RECENT_SPARE_BYTES: u64 = 1 << 20;

/// What identifies a deal and fixes its code, for [`OwnerState::new`].
#[derive(Debug, Clone, Copy)]
pub struct DealParams {
    /// The deal id on chain.
    pub deal: u64,
    /// Chain id.
    pub chain_id: u64,
    /// Market contract.
    pub market: Address,
    /// The provider account.
    pub provider: Address,
    /// N, blocks.
    pub num_blocks: u64,
    /// β, bytes per block.
    pub block_bytes: u32,
    /// λ, samples per run.
    pub lambda: u32,
}

impl OwnerState {
    /// A fresh state for a deal before its upload: nothing uploaded, nonce 0, the
    /// checksum keys from `seed` (secret), the owner's caches of `cache_levels` levels
    /// of checksums and `block_cache_levels` levels of blocks (App. A.1); kept in memory
    /// until [`OwnerState::save`].
    pub fn new(params: DealParams, seed: B256, cache_levels: u32, block_cache_levels: u32) -> Self {
        let DealParams { deal, chain_id, market, provider, num_blocks, block_bytes, lambda } = params;
        Self {
            deal,
            chain_id,
            market,
            provider,
            seed,
            num_blocks,
            block_bytes,
            lambda,
            file_bytes: 0,
            nonce: 0,
            uploaded: false,
            write_count: 0,
            rebuild_count: 0,
            root_u: B256::ZERO,
            c: None,
            levels: Vec::new(),
            digest_version: 0,
            cache_levels,
            pending: None,
            stash_file: None,
            block_cache_levels,
            recent: Vec::new(),
            recent_disk: None,
            deferred_failure: None,
            c_snapshot: None,
            path: None,
            stashed: Vec::new(),
            local_levels: None,
            inline_sigma: sigma_files::Inline::new(),
            unsaved: false,
        }
    }

    /// Reads the state file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let buf = std::fs::read(path)
            .with_context(|| format!("cannot read the owner state {} (run `dpor deal open` first?)", path.display()))?;
        let contents = slots::contents_of(&buf, path)?;
        let mut state: Self =
            serde_json::from_slice(contents.json).with_context(|| format!("the owner state {} is corrupt", path.display()))?;
        state.inline_sigma = sigma_files::parse_inline(contents.blob, path)?;
        state.path = Some(path.to_path_buf());
        state.recent = state.load_recent();
        // The cached checksums, from their sidecars (one read per file).
        let mut files: BTreeMap<String, sigma_files::RunSigmas> = BTreeMap::new();
        let entries = state.c.iter_mut().chain(state.levels.iter_mut().flatten());
        for e in entries.filter(|e| e.sigma.is_none()) {
            let Some(name) = e.sigma_file.clone() else { continue };
            if !files.contains_key(&name) {
                files.insert(name.clone(), sigma_files::read(path, &name, &state.inline_sigma)?);
            }
            let runs = files.get(&name).map(|r| r.as_slice()).unwrap_or_default();
            let (_, values) = runs
                .iter()
                .find(|(r, _)| *r == e.run)
                .with_context(|| format!("the checksums file {} has no checksums for run {:?}", sigma_files::path(path, &name).display(), e.run))?;
            e.sigma = Some(values.clone());
        }
        // The pending batch's blocks, from the recent-writes sidecar.
        let first = state.total_writes() + 1;
        if let Some(Pending::WriteBatch { writes, recent_blocks: Some(digest), .. }) = &mut state.pending {
            let by_number: BTreeMap<u64, &RecentWrite> = state.recent.iter().map(|r| (r.0, r)).collect();
            for (j, w) in writes.iter_mut().enumerate() {
                let number = first + j as u64;
                let (_, index, block) = by_number.get(&number).copied().with_context(|| {
                    format!("the pending batch's write {number} is missing from the recent-writes file (the owner state {} is damaged)", path.display())
                })?;
                anyhow::ensure!(*index == w.index, "the recent-writes file holds block {index} as write {number}, the pending batch block {}", w.index);
                w.block = block.clone().into();
            }
            let blocks: Vec<&[u8]> = writes.iter().map(|w| w.block.as_ref()).collect();
            anyhow::ensure!(
                blocks_digest(&merkle::block_roots(&blocks)) == *digest,
                "the pending batch's blocks in the recent-writes file differ from those the owner prepared (the owner state {} is damaged)",
                path.display()
            );
        }
        Ok(state)
    }

    /// Saves the state to [`OwnerState::path`], if it has one.
    pub fn persist(&mut self) -> anyhow::Result<()> {
        match self.path.clone() {
            Some(p) => self.save(&p),
            None => {
                self.unsaved = false;
                Ok(())
            }
        }
    }

    /// The stash file of older versions (one fixed name).
    fn sigma_path(&self) -> Option<PathBuf> {
        self.path.as_ref().map(|p| PathBuf::from(format!("{}.sigma", p.display())))
    }

    /// The runs' entries whose checksums are cached, C first then ascending ℓ.
    fn cached_entries_mut(&mut self) -> impl Iterator<Item = &mut RunEntry> {
        self.c.iter_mut().chain(self.levels.iter_mut().flatten()).filter(|e| e.sigma.is_some())
    }

    /// The cached checksums of `runs` are those of the current stash (the σ the owner
    /// predicted and the node's answer was checked against): the stash's sidecar
    /// becomes theirs, and nothing is written again for them. Call when committing a
    /// state whose new cached runs were all stashed, before saving it.
    pub fn adopt_stash(&mut self, runs: &[WireRun]) {
        let Some(name) = self.stash_file.take() else { return };
        let stashed: Vec<WireRun> = self.stashed.iter().map(|(r, _)| *r).collect();
        for e in self.cached_entries_mut().filter(|e| e.sigma_file.is_none() && runs.contains(&e.run)) {
            // Only what this process stashed is known to be in the file (else written anew).
            if stashed.contains(&e.run) {
                e.sigma_file = Some(name.clone());
            }
        }
        self.stashed.clear();
    }

    /// Keeps the checksums `sigma` of `run` durably (the sidecar file, fsynced and
    /// renamed into place) until [`OwnerState::drop_sigma`].
    pub fn stash_sigma(&mut self, run: WireRun, sigma: &[Fp]) -> anyhow::Result<()> {
        self.stash_sigmas(&[(run, sigma.to_vec())])
    }

    /// [`OwnerState::stash_sigma`] for several runs at once (a batch): a new checksum
    /// sidecar ([`OwnerState::stash_file`]), named in the state by the next save.
    pub fn stash_sigmas(&mut self, runs: &[(WireRun, Vec<Fp>)]) -> anyhow::Result<()> {
        let values: Vec<(WireRun, Vec<u64>)> = runs.iter().map(|(r, s)| (*r, sigma_to_u64(s))).collect();
        if let Some(path) = self.path.clone() {
            self.stash_file = Some(sigma_files::write(&path, &values, &mut self.inline_sigma)?);
        }
        self.stashed = values;
        Ok(())
    }

    /// The stashed checksums of `run` (memory, else the stash's sidecar file).
    /// Errors: no stash, a damaged one, or one without `run`.
    pub fn stashed_sigma(&self, run: WireRun) -> anyhow::Result<Vec<Fp>> {
        if let Some((_, v)) = self.stashed.iter().find(|(r, _)| *r == run) {
            return sigma_from_u64(v);
        }
        let state = self.path.as_deref().context("no checksums kept for the pending run")?;
        let runs = match &self.stash_file {
            Some(name) => sigma_files::read(state, name, &self.inline_sigma)?,
            None => {
                let path = self.sigma_path().context("no checksums kept for the pending run")?;
                let buf = std::fs::read(&path).with_context(|| format!("cannot read the pending checksums {}", path.display()))?;
                sigma_files::parse(&buf, None, &path)?
            }
        };
        match runs.iter().find(|(r, _)| *r == run) {
            Some((_, v)) => sigma_from_u64(v),
            None => anyhow::bail!("the pending checksums file is for runs {:?}, not {run:?}", runs.iter().map(|(r, _)| *r).collect::<Vec<_>>()),
        }
    }

    /// Forgets the unfinished request the node definitely refused (nothing of it was
    /// applied): clears [`OwnerState::pending`] and the stash, and saves the state.
    /// Errors: the state file cannot be written.
    pub fn drop_intent(&mut self) -> anyhow::Result<()> {
        self.pending = None;
        self.drop_sigma();
        self.persist()
    }

    /// Forgets the stashed checksums; their file is deleted by the next save that
    /// leaves nothing pending (once no saved state can need it).
    pub fn drop_sigma(&mut self) {
        self.stashed.clear();
        self.stash_file = None;
    }

    /// Replaces the block cache's writes numbered above `after` with `writes` (numbered
    /// `after` + 1, …: (index, block)) and makes them durable in the recent-writes
    /// sidecar (appended, or the file rewritten when its content is unknown or mostly
    /// stale) before the intent that names them is saved. Records on disk under the
    /// same numbers (a refused batch's) are superseded: the last record wins on load.
    /// Errors: the sidecar cannot be written.
    pub fn record_recent(&mut self, after: u64, writes: impl IntoIterator<Item = (u64, Vec<u8>)>) -> anyhow::Result<()> {
        self.recent.retain(|(w, _, _)| *w <= after);
        let start = self.recent.len();
        self.recent.extend(writes.into_iter().enumerate().map(|(j, (i, b))| (after + 1 + j as u64, i, b)));
        self.store_recent(start..self.recent.len())
    }

    /// Keeps in [`OwnerState::recent`] only the writes of the current smallest levels
    /// ([`recent_window_start`] to the total; records above it, a refused request's,
    /// are dropped from memory), after a commit. The sidecar already holds them.
    pub fn trim_recent(&mut self) {
        let total = self.total_writes();
        let window = recent_window_start(total, self.write_count, self.block_cache_levels);
        self.recent.retain(|(w, _, _)| *w > window && *w <= total);
    }

    fn recent_path(&self) -> Option<PathBuf> {
        self.path.as_ref().map(|p| PathBuf::from(format!("{}.recent", p.display())))
    }

    /// Saves [`OwnerState::recent`] to the sidecar `<state>.recent`, durably. Called
    /// before the state that needs it is saved, with the writes of both the previous
    /// and the new state, so either state finds its blocks after a crash. Appends the
    /// writes numbered above what the file holds (one fsync), or rewrites the file
    /// atomically when its content is unknown ([`OwnerState::recent_disk`]) or mostly
    /// stale (entries of levels consumed since): a batch costs its own blocks, not the
    /// whole cache (up to 2^L − 1 blocks).
    pub fn save_recent(&mut self) -> anyhow::Result<()> {
        let through = self.recent_disk.map_or(0, |d| d.through);
        let fresh: Vec<usize> = (0..self.recent.len()).filter(|&k| self.recent[k].0 > through).collect();
        self.store_recent(fresh)
    }

    /// Makes the entries `fresh` (positions in [`OwnerState::recent`]) durable in the
    /// sidecar: appended (one fsync) when the file's content is known
    /// ([`OwnerState::recent_disk`]) and not mostly stale, else the file rewritten whole
    /// from [`OwnerState::recent`]. Errors: the sidecar cannot be written.
    fn store_recent(&mut self, fresh: impl IntoIterator<Item = usize>) -> anyhow::Result<()> {
        let Some(path) = self.recent_path() else { return Ok(()) };
        let last = self.recent.iter().map(|r| r.0).max().unwrap_or(0);
        if let Some(d) = self.recent_disk {
            let mut buf = Vec::new();
            let mut count = 0u64;
            for k in fresh {
                push_recent_record(&mut buf, &self.recent[k]);
                count += 1;
            }
            if d.records + count <= 2 * self.recent.len() as u64 + 256 {
                let len = append_durably(&path, d.end, d.len, &buf)?;
                self.recent_disk =
                    Some(RecentDisk { records: d.records + count, through: d.through.max(last), end: d.end + buf.len() as u64, len });
                return Ok(());
            }
        }
        let mut buf = Vec::with_capacity(RECENT_MAGIC_3.len() + self.recent.iter().map(|r| 56 + r.2.len()).sum::<usize>());
        buf.extend_from_slice(RECENT_MAGIC_3);
        self.recent.iter().for_each(|r| push_recent_record(&mut buf, r));
        let end = buf.len() as u64;
        buf.resize(spare_len(end) as usize, 0);
        write_durably(&path, &buf)?;
        self.recent_disk = Some(RecentDisk { records: self.recent.len() as u64, through: last, end, len: buf.len() as u64 });
        Ok(())
    }

    /// Reads the recent-writes sidecar; empty if it is missing or damaged (the runs it
    /// would cover are then spot-checked instead).
    fn load_recent(&mut self) -> Vec<RecentWrite> {
        let Some(path) = self.recent_path() else { return Vec::new() };
        let Ok(buf) = std::fs::read(&path) else { return Vec::new() };
        let version = [(RECENT_MAGIC_3, RecordCheck::Blake3), (RECENT_MAGIC_2, RecordCheck::Keccak)]
            .into_iter()
            .find(|(magic, _)| buf.starts_with(*magic));
        if let Some((magic, check)) = version {
            let (records, clean, used) = parse_recent_2(&buf[magic.len()..], check);
            let count = records.len() as u64;
            // Last record per write number wins (a refused batch's numbers reused).
            let mut by_w: BTreeMap<u64, RecentWrite> = BTreeMap::new();
            for r in records {
                by_w.insert(r.0, r);
            }
            let out: Vec<RecentWrite> = by_w.into_values().collect();
            // A torn last record (a crash mid-append), or a file of version 2 (its
            // records checked by keccak256): rewrite before appending again.
            let current = check == RecordCheck::Blake3;
            self.recent_disk = (clean && current).then(|| RecentDisk {
                records: count,
                through: out.iter().map(|r| r.0).max().unwrap_or(0),
                end: (magic.len() + used) as u64,
                len: buf.len() as u64,
            });
            return out;
        }
        parse_recent(&buf).unwrap_or_default()
    }

    /// Writes the state file atomically and durably (in place, in the older of its two
    /// slots, then `fdatasync`: `slots`; a new file the first time, by temp file,
    /// fsync, rename and fsync of the folder), readable by the owner only, after the
    /// checksum sidecars it names
    /// ([`RunEntry::sigma_file`]: one new sidecar for the cached σ not yet in one); then
    /// deletes the sidecars it no longer names. From then on the state lives at `path`
    /// ([`OwnerState::path`]). The blocks of a pending batch stay out of the JSON when
    /// they are in the recent-writes sidecar beside `path`. Errors: a file cannot be written.
    pub fn save(&mut self, path: &Path) -> anyhow::Result<()> {
        let moved = self.path.as_deref() != Some(path);
        if moved {
            // Sidecars live beside their state file: write them beside the new one.
            self.cached_entries_mut().for_each(|e| e.sigma_file = None);
            self.stash_file = None;
            if let Some(Pending::WriteBatch { recent_blocks, .. }) = &mut self.pending {
                *recent_blocks = None;
            }
        }
        let missing: Vec<(WireRun, Vec<u64>)> =
            self.cached_entries_mut().filter(|e| e.sigma_file.is_none()).filter_map(|e| Some((e.run, e.sigma.clone()?))).collect();
        if !missing.is_empty() {
            let name = sigma_files::write(path, &missing, &mut self.inline_sigma)?;
            for e in self.cached_entries_mut().filter(|e| e.sigma_file.is_none()) {
                e.sigma_file = Some(name.clone());
            }
        }
        // The JSON, without the blocks the recent-writes sidecar holds.
        let mut taken = Vec::new();
        if let Some(Pending::WriteBatch { writes, recent_blocks: Some(_), .. }) = &mut self.pending {
            taken = writes.iter_mut().map(|w| std::mem::take(&mut w.block)).collect();
        }
        let text = serde_json::to_string_pretty(self);
        if let Some(Pending::WriteBatch { writes, recent_blocks: Some(_), .. }) = &mut self.pending {
            writes.iter_mut().zip(taken).for_each(|(w, b)| w.block = b);
        }
        // The small sidecars this state names go inside it.
        let mut keep: Vec<String> =
            self.c.iter().chain(self.levels.iter().flatten()).filter_map(|e| e.sigma_file.clone()).collect();
        keep.extend(self.stash_file.clone());
        self.inline_sigma.retain(|name, _| keep.contains(name));
        let blob = sigma_files::encode_inline(&self.inline_sigma);
        slots::save(path, slots::Contents { json: text?.as_bytes(), blob: &blob })?;
        self.unsaved = false;
        self.path = Some(path.to_path_buf());
        if moved && self.block_cache_levels > 0 {
            // The block cache beside the new file too (the appends go there from now on).
            self.recent_disk = None;
            self.save_recent()?;
        }
        if self.pending.is_none() {
            // The stash of older versions, once no saved intent can need it.
            if let Some(p) = self.sigma_path() {
                let _ = std::fs::remove_file(p);
            }
        }
        let keep: Vec<&str> = keep.iter().map(String::as_str).collect();
        sigma_files::collect_garbage(path, &keep);
        Ok(())
    }

    /// The block format.
    pub fn format(&self) -> anyhow::Result<BlockFormat> {
        BlockFormat::new(self.block_bytes as usize).context("bad block size in the owner state")
    }

    /// k = log2 N.
    pub fn log_blocks(&self) -> u32 {
        self.num_blocks.trailing_zeros()
    }

    /// The checksum keys.
    pub fn keys(&self) -> anyhow::Result<OwnerKeys> {
        Ok(OwnerKeys::derive(&self.seed.0, self.format()?.width()))
    }

    /// Total writes ever.
    pub fn total_writes(&self) -> u64 {
        self.rebuild_count * self.num_blocks + self.write_count
    }

    /// Takes the owner's copy of its smallest levels ([`Self::local_levels`]), keeping
    /// only what belongs to this state: nothing if the copy was made for another
    /// (total writes, rootU), else the levels naming the run this state has at that level.
    pub fn take_local_levels(&mut self) -> BTreeMap<u32, LocalLevel> {
        let at = (self.total_writes(), self.root_u);
        let Some(copy) = self.local_levels.take().filter(|c| c.at == at) else {
            return BTreeMap::new();
        };
        copy.levels.into_iter().filter(|(l, lv)| self.run_at(*l) == Some(lv.run)).collect()
    }

    /// Level `level` of the owner's copy ([`Self::local_levels`]), if the copy belongs
    /// to this state and holds the run this state has at that level.
    pub fn local_level(&self, level: u32) -> Option<&LocalLevel> {
        let copy = self.local_levels.as_ref().filter(|c| c.at == (self.total_writes(), self.root_u))?;
        let lv = copy.levels.get(&level)?;
        (self.run_at(level) == Some(lv.run)).then_some(lv)
    }

    /// The run this state has at level `level`, if any.
    fn run_at(&self, level: u32) -> Option<WireRun> {
        self.levels.get(level as usize).and_then(|e| e.as_ref()).map(|e| e.run)
    }

    /// The next nonce (and records it as used).
    pub fn next_nonce(&mut self) -> u64 {
        self.nonce += 1;
        self.nonce
    }

    /// Leaves the save of a committed batch (no request pending any more) to the next
    /// save, instead of an `fdatasync` of its own (issue 23: one of the owner's flushes
    /// per batch when batches follow one another; docs/PERFORMANCE.md "tenth session").
    /// Until then the file holds the batch's intent, which a restart settles with the
    /// node as after a lost answer (`owner::recover` asks the node for the batch's
    /// nonce). The node keeps the answer of its last write, batch, resize or upload
    /// finish (`Request::Outcome`), whatever other requests (co-signs, σ̃ stores, reads)
    /// came after it, and every request that would replace that answer saves its
    /// intent first, which carries this commit. The next batch's intent save,
    /// [`OwnerState::persist`] or [`OwnerState::save_deferred`] writes it.
    pub fn defer_save(&mut self) {
        self.unsaved = true;
    }

    /// Writes a save left by [`OwnerState::defer_save`], if any. Errors: as
    /// [`OwnerState::persist`].
    pub fn save_deferred(&mut self) -> anyhow::Result<()> {
        if self.unsaved {
            self.persist()?;
        }
        Ok(())
    }

    /// Whether a committed batch's save is still to be written ([`OwnerState::defer_save`]).
    pub fn has_unsaved_commit(&self) -> bool {
        self.unsaved
    }

    /// The filled levels' roots, ascending ℓ.
    pub fn level_roots(&self) -> Vec<B256> {
        self.levels.iter().flatten().map(|r| r.root).collect()
    }

    /// C and the filled levels in run order, with sizes: (entry, size in coded blocks).
    pub fn runs(&self) -> Vec<(&RunEntry, u64)> {
        let mut out = Vec::new();
        if let Some(c) = &self.c {
            out.push((c, 2 * self.num_blocks));
        }
        for (l, e) in self.levels.iter().enumerate() {
            if let Some(e) = e {
                out.push((e, 2u64 << l));
            }
        }
        out
    }
}

/// Writes `data` to `path` atomically and durably, mode 0600: a temp file beside it,
/// fsync, rename over `path`, fsync of the folder.
fn write_durably(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    let tmp = PathBuf::from(format!("{}.tmp", path.display()));
    {
        use std::io::Write;
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts.open(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(data)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The first write number (exclusive) of the writes the smallest `levels` levels hold
/// after `total` writes with counter t: writes `(total − (t mod 2^levels), total]`.
pub fn recent_window_start(total: u64, t: u64, levels: u32) -> u64 {
    let mask = if levels >= 64 { u64::MAX } else { (1u64 << levels) - 1 };
    total - (t & mask)
}

/// keccak256 of a batch's block roots in order ([`Pending::WriteBatch`]'s `recent_blocks`).
pub fn blocks_digest(roots: &[B256]) -> B256 {
    alloy_primitives::keccak256(roots.iter().flat_map(|r| r.0).collect::<Vec<u8>>())
}

/// Writes `data` at byte `end` of the file at `path`, `len` bytes long (records, then
/// zeros), and fsyncs it (`fdatasync`). Within `len`, the file's size and blocks stay
/// as they are; past it, the zeros of [`spare_len`] are written after `data`. Returns
/// the file's new length. Errors: it cannot be opened, written or synced.
fn append_durably(path: &Path, end: u64, len: u64, data: &[u8]) -> anyhow::Result<u64> {
    let need = end + data.len() as u64;
    if need <= len {
        write_at_durably(path, end, data)?;
        return Ok(len);
    }
    let grown = spare_len(need);
    let mut buf = data.to_vec();
    buf.resize((grown - end) as usize, 0);
    write_at_durably(path, end, &buf)?;
    Ok(grown)
}

/// Writes `data` at byte `offset` of the existing file at `path` and `fdatasync`s it:
/// within the file's length, no block is allocated and no metadata changes (the state
/// file's slots, the block cache's zeros written ahead). Errors: it cannot be opened,
/// written or synced.
fn write_at_durably(path: &Path, offset: u64, data: &[u8]) -> anyhow::Result<()> {
    use std::os::unix::fs::FileExt as _;
    let f = std::fs::OpenOptions::new().write(true).open(path).with_context(|| format!("cannot open {} to write", path.display()))?;
    f.write_all_at(data, offset).with_context(|| format!("cannot write {}", path.display()))?;
    f.sync_data().with_context(|| format!("cannot fsync {}", path.display()))
}

/// The length of a block cache sidecar whose records end at byte `end`, with
/// [`RECENT_SPARE_BYTES`] of zeros after them, rounded up to 4 KiB pages.
fn spare_len(end: u64) -> u64 {
    (end + RECENT_SPARE_BYTES).next_multiple_of(4096)
}

/// The 32-byte check of a block-cache sidecar record, by file version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RecordCheck {
    /// keccak256 ([`RECENT_MAGIC_2`], read only).
    Keccak,
    /// BLAKE3 ([`RECENT_MAGIC_3`]).
    Blake3,
}

impl RecordCheck {
    fn of(self, body: &[u8]) -> [u8; 32] {
        match self {
            RecordCheck::Keccak => alloy_primitives::keccak256(body).0,
            RecordCheck::Blake3 => *blake3::hash(body).as_bytes(),
        }
    }
}

/// One record of the append-only sidecar ([`RECENT_MAGIC_3`]): w, i, len (u64 LE), the
/// block, BLAKE3 of those.
fn push_recent_record(buf: &mut Vec<u8>, (w, i, b): &RecentWrite) {
    let start = buf.len();
    buf.extend_from_slice(&w.to_le_bytes());
    buf.extend_from_slice(&i.to_le_bytes());
    buf.extend_from_slice(&(b.len() as u64).to_le_bytes());
    buf.extend_from_slice(b);
    let check = RecordCheck::Blake3.of(&buf[start..]);
    buf.extend_from_slice(&check);
}

/// Records of an append-only sidecar (after its magic), up to the first damaged or
/// truncated one or the zeros written ahead ([`RecentDisk`]; a record's write number
/// is never 0); whether the whole buffer was clean (records, then zeros only); and the
/// bytes the records take.
fn parse_recent_2(buf: &[u8], record_check: RecordCheck) -> (Vec<RecentWrite>, bool, usize) {
    let mut out = Vec::new();
    let mut at = 0usize;
    let u64_at = |o: usize| buf.get(o..o + 8).and_then(|x| x.try_into().ok()).map(u64::from_le_bytes);
    while at < buf.len() {
        if buf[at..].iter().take(24).all(|b| *b == 0) {
            // The zeros written ahead; anything else after them is a torn record.
            return (out, buf[at..].iter().all(|b| *b == 0), at);
        }
        let (Some(w), Some(i), Some(len)) = (u64_at(at), u64_at(at + 8), u64_at(at + 16)) else { return (out, false, at) };
        let Some(end) = usize::try_from(len).ok().and_then(|l| l.checked_add(at + 24)) else { return (out, false, at) };
        let (Some(body), Some(check)) = (buf.get(at..end), buf.get(end..end.saturating_add(32))) else { return (out, false, at) };
        if check.len() != 32 || record_check.of(body).as_slice() != check {
            return (out, false, at);
        }
        out.push((w, i, body[24..].to_vec()));
        at = end + 32;
    }
    (out, true, at)
}

fn parse_recent(buf: &[u8]) -> Option<Vec<RecentWrite>> {
    let m = RECENT_MAGIC.len();
    if buf.len() < m + 8 + 32 || &buf[..m] != RECENT_MAGIC {
        return None;
    }
    let (body, check) = buf.split_at(buf.len() - 32);
    if alloy_primitives::keccak256(body).as_slice() != check {
        return None;
    }
    let u64_at = |o: usize| body.get(o..o + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    let count = u64_at(m)?;
    let mut at = m + 8;
    let mut out = Vec::new();
    for _ in 0..count {
        let (w, i, len) = (u64_at(at)?, u64_at(at + 8)?, usize::try_from(u64_at(at + 16)?).ok()?);
        let block = body.get(at + 24..at.checked_add(24)?.checked_add(len)?)?.to_vec();
        at += 24 + len;
        out.push((w, i, block));
    }
    (at == body.len()).then_some(out)
}

/// Checksums as canonical integers (for the JSON file).
pub fn sigma_to_u64(s: &[Fp]) -> Vec<u64> {
    s.iter().map(|e| field::to_u64(*e)).collect()
}

/// Checksums back from canonical integers; errors on a non-canonical value.
pub fn sigma_from_u64(v: &[u64]) -> anyhow::Result<Vec<Fp>> {
    v.iter().map(|x| field::from_bytes(x.to_le_bytes()).context("a cached checksum is not a field element (state file corrupt)")).collect()
}

/// Width of checksum vectors (ρ).
pub const SIGMA_WIDTH: usize = RHO;

#[cfg(test)]
mod tests {
    use super::*;

    /// A state at `path` with N = 64 blocks of 8 bytes and a block cache of 4 levels.
    fn cached_state(path: &Path) -> OwnerState {
        let params =
            DealParams { deal: 1, chain_id: 1, market: Address::ZERO, provider: Address::ZERO, num_blocks: 64, block_bytes: 8, lambda: 4 };
        OwnerState { path: Some(path.to_path_buf()), ..OwnerState::new(params, B256::repeat_byte(1), 2, 4) }
    }

    fn state(path: Option<PathBuf>) -> OwnerState {
        let params = DealParams {
            deal: 1,
            chain_id: 31337,
            market: Address::ZERO,
            provider: Address::ZERO,
            num_blocks: 4,
            block_bytes: 64,
            lambda: 8,
        };
        OwnerState { path, ..OwnerState::new(params, B256::repeat_byte(1), 2, 0) }
    }

    #[test]
    fn intents_and_stashed_checksums_survive_a_reload_and_damage_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("owner.json");
        let mut s = state(Some(path.clone()));
        let run = WireRun { tag: 0, built_at: 4 };
        // More values than a sidecar kept inside the state file holds: a file of its own.
        let values = sigma_files::INLINE_MAX_VALUES as u64 + 2;
        let sigma: Vec<Fp> = (0..values).map(|i| field::from_bytes((i * 7).to_le_bytes()).unwrap()).collect();
        s.stash_sigma(run, &sigma).unwrap();
        s.pending = Some(Pending::StoreSealed { run, next: 3, more: vec![] });
        s.persist().unwrap();
        // A new process: only the files.
        let back = OwnerState::load(&path).unwrap();
        assert_eq!(back.pending, s.pending);
        assert_eq!(back.stashed_sigma(run).unwrap(), sigma);
        assert!(back.stashed_sigma(WireRun { tag: 1, built_at: 4 }).is_err(), "checksums of another run");
        // One flipped byte in the sidecar is an error, never other checksums.
        let side = sigma_files::path(&path, back.stash_file.as_deref().unwrap());
        let mut bytes = std::fs::read(&side).unwrap();
        bytes[40] ^= 1;
        std::fs::write(&side, &bytes).unwrap();
        assert!(back.stashed_sigma(run).is_err());
        let mut back = back;
        back.drop_sigma();
        back.pending = None;
        back.persist().unwrap();
        assert!(!side.exists(), "a stash no saved state names is deleted");
    }

    #[test]
    fn a_c_snapshot_survives_a_reload_in_the_state_and_in_a_pending_batch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("owner.json");
        let mut s = state(Some(path.clone()));
        let snap: CSnapshot = [(0u64, vec![1u64, 2]), (3, vec![7, 9])].into_iter().collect();
        s.c_snapshot = Some(snap.clone());
        s.pending = Some(Pending::WriteBatch {
            nonce: 5,
            writes: vec![],
            new_root_u: B256::repeat_byte(2),
            runs: vec![WireRun { tag: 0, built_at: 8 }],
            file_bytes: None,
            c_snapshot: Some(snap.clone()),
            rejected: None,
            recent_blocks: None,
        });
        s.persist().unwrap();
        let back = OwnerState::load(&path).unwrap();
        assert_eq!(back.c_snapshot, Some(snap));
        assert_eq!(back.pending, s.pending);
    }

    #[test]
    fn a_batch_stashes_several_runs_and_an_old_single_run_sidecar_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("owner.json");
        let mut s = state(Some(path.clone()));
        let f = |k: u64| -> Vec<Fp> { (0..8u64).map(|i| field::from_bytes((i * 3 + k).to_le_bytes()).unwrap()).collect() };
        let (a, b) = (WireRun { tag: 0, built_at: 8 }, WireRun { tag: 2, built_at: 10 });
        s.stash_sigmas(&[(a, f(1)), (b, f(2))]).unwrap();
        s.persist().unwrap();
        let back = OwnerState::load(&path).unwrap();
        assert_eq!(back.stashed_sigma(a).unwrap(), f(1));
        assert_eq!(back.stashed_sigma(b).unwrap(), f(2));
        assert!(back.stashed_sigma(WireRun { tag: 1, built_at: 9 }).is_err());
        // The sidecar as the previous version wrote it (one run, magic dpor-sigma-1).
        let values = sigma_to_u64(&f(3));
        let mut buf = sigma_files::SIGMA_MAGIC.to_vec();
        buf.extend_from_slice(&a.tag.to_le_bytes());
        buf.extend_from_slice(&a.built_at.to_le_bytes());
        buf.extend_from_slice(&(values.len() as u64).to_le_bytes());
        values.iter().for_each(|v| buf.extend_from_slice(&v.to_le_bytes()));
        let check = alloy_primitives::keccak256(&buf);
        buf.extend_from_slice(check.as_slice());
        std::fs::write(PathBuf::from(format!("{}.sigma", path.display())), &buf).unwrap();
        let mut back = back;
        back.stash_file = None; // as an older version's state names no stash file
        assert_eq!(back.stashed_sigma(a).unwrap(), f(3));
        // The recent-writes sidecar round-trips; a damaged one reads as empty.
        let mut s = back;
        s.recent = vec![(5, 1, vec![1, 2, 3]), (6, 0, vec![4; 64])];
        s.save_recent().unwrap();
        assert_eq!(OwnerState::load(&path).unwrap().recent, s.recent);
        let side = PathBuf::from(format!("{}.recent", path.display()));
        let mut bytes = std::fs::read(&side).unwrap();
        bytes[20] ^= 1;
        std::fs::write(&side, &bytes).unwrap();
        assert!(OwnerState::load(&path).unwrap().recent.is_empty());
    }

    #[test]
    fn the_recent_sidecar_appends_survives_a_torn_tail_and_compacts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("owner.json");
        let mut s = cached_state(&path);
        s.save(&path).unwrap();
        let side = PathBuf::from(format!("{}.recent", path.display()));
        let w = |n: u64| (n, n % 64, vec![n as u8; 8]);
        s.recent = (1..=3).map(w).collect();
        s.save_recent().unwrap(); // first save: whole file, the records then zeros
        let len3 = std::fs::metadata(&side).unwrap().len();
        let d3 = s.recent_disk.unwrap();
        assert_eq!((d3.len, d3.records), (len3, 3));
        assert!(len3 >= d3.end + RECENT_SPARE_BYTES, "zeros written ahead");
        let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&side).unwrap());
        s.recent.extend((4..=5).map(w));
        s.save_recent().unwrap(); // appends two records (8 + 24 + 32 bytes each) into the zeros
        assert_eq!(std::fs::metadata(&side).unwrap().len(), len3, "the file's size does not change");
        assert_eq!(std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&side).unwrap()), ino, "appended in place");
        assert_eq!(s.recent_disk.unwrap().end, d3.end + 2 * 64);
        let back = OwnerState::load(&path).unwrap();
        assert_eq!(back.recent, s.recent);
        assert_eq!(back.recent_disk, s.recent_disk, "the load finds where the records end");
        // Appends past the zeros grow the file, with zeros ahead again.
        let big = |n: u64| (n, n % 64, vec![n as u8; 300 << 10]);
        s.recent.extend((6..=9).map(big));
        s.save_recent().unwrap();
        let d = s.recent_disk.unwrap();
        assert_eq!(std::fs::metadata(&side).unwrap().len(), d.len);
        assert!(d.len >= d.end + RECENT_SPARE_BYTES && d.len > len3);
        assert_eq!(OwnerState::load(&path).unwrap().recent, s.recent);
        s.recent.retain(|r| r.0 <= 5);
        s.recent_disk = None;
        s.save_recent().unwrap();
        // A refused batch's number reused with another block: the last record wins
        // after a rewrite (the owner marks the file for it).
        s.recent.retain(|r| r.0 <= 4);
        s.recent.push((5, 9, vec![0xEE; 8]));
        s.recent_disk = None;
        s.save_recent().unwrap();
        let back = OwnerState::load(&path).unwrap();
        assert_eq!(back.recent, s.recent);
        // A torn append (crash mid-record, into the zeros): the clean prefix loads, and
        // the next save rewrites instead of appending after the tear.
        let mut bytes = std::fs::read(&side).unwrap();
        let good = back.recent_disk.unwrap().end as usize;
        bytes[good..good + 30].copy_from_slice(&[7u8; 30]);
        std::fs::write(&side, &bytes).unwrap();
        let mut back = OwnerState::load(&path).unwrap();
        assert_eq!(back.recent, s.recent);
        assert_eq!(back.recent_disk, None);
        back.recent.push(w(6));
        back.save_recent().unwrap();
        assert_eq!(back.recent_disk.unwrap().end as usize, good + 64, "rewritten, not appended after the tear");
        assert!(std::fs::read(&side).unwrap()[good + 64..].iter().all(|b| *b == 0), "the tear is gone");
        assert_eq!(OwnerState::load(&path).unwrap().recent, back.recent);
        // Mostly stale (levels consumed): compacted to what is kept.
        for n in 7..400u64 {
            back.recent.push(w(n));
            back.recent.retain(|r| r.0 > n.saturating_sub(3));
            back.save_recent().unwrap();
        }
        assert!(back.recent_disk.unwrap().end < 600 * 64, "the sidecar stays bounded");
        assert!(std::fs::metadata(&side).unwrap().len() <= spare_len(600 * 64));
        let loaded = OwnerState::load(&path).unwrap().recent;
        assert!(back.recent.iter().all(|r| loaded.contains(r)), "every kept write is on disk");
    }

    #[test]
    fn a_block_cache_sidecar_of_version_2_loads_and_is_rewritten_as_version_3() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("owner.json");
        let mut s = cached_state(&path);
        s.save(&path).unwrap();
        let side = PathBuf::from(format!("{}.recent", path.display()));
        // As versions before 2026-11-29 wrote it: keccak256 checks, zeros after.
        let records: Vec<RecentWrite> = (1..=3u64).map(|n| (n, n % 64, vec![n as u8; 40])).collect();
        let mut old = RECENT_MAGIC_2.to_vec();
        for (w, i, b) in &records {
            let start = old.len();
            old.extend_from_slice(&w.to_le_bytes());
            old.extend_from_slice(&i.to_le_bytes());
            old.extend_from_slice(&(b.len() as u64).to_le_bytes());
            old.extend_from_slice(b);
            let check = alloy_primitives::keccak256(&old[start..]);
            old.extend_from_slice(check.as_slice());
        }
        old.resize(8192, 0);
        std::fs::write(&side, &old).unwrap();
        let mut back = OwnerState::load(&path).unwrap();
        assert_eq!(back.recent, records, "version 2 records read");
        assert_eq!(back.recent_disk, None, "not appended to: its checks are keccak256");
        // A version 3 record appended to it would not parse: the next save rewrites.
        back.recent.push((4, 4, vec![4; 40]));
        back.save_recent().unwrap();
        let bytes = std::fs::read(&side).unwrap();
        assert!(bytes.starts_with(RECENT_MAGIC_3));
        let again = OwnerState::load(&path).unwrap();
        assert_eq!(again.recent, back.recent);
        assert!(again.recent_disk.is_some(), "version 3: appended to from now on");
        // Its records are checked by BLAKE3, not keccak256: one bit off fails the check.
        let mut bad = bytes.clone();
        bad[RECENT_MAGIC_3.len() + 30] ^= 1;
        std::fs::write(&side, &bad).unwrap();
        assert!(OwnerState::load(&path).unwrap().recent.is_empty());
        let mut body = records[0].0.to_le_bytes().to_vec();
        body.extend_from_slice(&records[0].1.to_le_bytes());
        body.extend_from_slice(&(records[0].2.len() as u64).to_le_bytes());
        body.extend_from_slice(&records[0].2);
        let at = RECENT_MAGIC_3.len() + body.len();
        assert_eq!(&bytes[at..at + 32], blake3::hash(&body).as_bytes(), "the first record's check is BLAKE3 of it");
    }

    #[test]
    fn a_state_file_from_before_batches_still_loads() {
        // Written by the previous version: no block cache, no `unchecked`, no `more`.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.json");
        let mut v = serde_json::to_value(state(None)).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("block_cache_levels");
        o.insert("c".into(), serde_json::json!({"run": {"tag": 0, "built_at": 0}, "root": B256::ZERO}));
        o.insert("pending".into(), serde_json::json!({"kind": "store_sealed", "run": {"tag": 0, "built_at": 0}, "next": 2}));
        std::fs::write(&path, v.to_string()).unwrap();
        let s = OwnerState::load(&path).unwrap();
        assert_eq!(s.block_cache_levels, 0);
        assert!(!s.c.unwrap().unchecked);
        assert_eq!(s.pending, Some(Pending::StoreSealed { run: WireRun { tag: 0, built_at: 0 }, next: 2, more: vec![] }));
    }

    #[test]
    fn a_state_file_without_an_intent_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.json");
        let mut v = serde_json::to_value(state(None)).unwrap();
        v.as_object_mut().unwrap().remove("pending");
        std::fs::write(&path, v.to_string()).unwrap();
        let s = OwnerState::load(&path).unwrap();
        assert_eq!(s.pending, None);
        assert_eq!(s.path.as_deref(), Some(path.as_path()));
    }

    /// Positions of a test level whose σ (2 × [`BIG`] values) is too large to be kept
    /// inside the state file (`sigma_files::INLINE_MAX_VALUES`): a sidecar file.
    const BIG: u64 = (sigma_files::INLINE_MAX_VALUES / RHO) as u64 + 1;

    fn level_sigma(k: u64, size: u64) -> Vec<u64> {
        (0..size * RHO as u64).map(|i| i * 31 + k).collect()
    }

    fn sigma_files_of(path: &Path) -> Vec<String> {
        let mut v: Vec<String> = sigma_files::sidecars(path).into_iter().map(|(n, _)| n).collect();
        v.sort();
        v
    }

    /// The cached σ live in a content-named sidecar, not the JSON; they reload equal; a
    /// consumed level's sidecar is deleted once no saved state names it; an older state
    /// file with σ inline loads, and its next save moves them out; a damaged sidecar is
    /// a load error that names it.
    #[test]
    fn cached_checksums_live_in_sidecars_and_older_inline_files_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("owner.json");
        let mut s = state(Some(path.clone()));
        let entry = |l: u32, k: u64| RunEntry {
            run: WireRun { tag: l + 1, built_at: k },
            root: B256::repeat_byte(k as u8),
            sigma: Some(level_sigma(k, BIG << l)),
            sigma_file: None,
            unchecked: false,
        };
        s.levels = vec![Some(entry(0, 3)), Some(entry(1, 2))];
        s.persist().unwrap();
        let text = read_json(&path).unwrap();
        assert!(!text.contains("\"sigma\""), "no σ in the JSON: {text}");
        let files = sigma_files_of(&path);
        assert_eq!(files.len(), 1, "one sidecar for the two levels");
        assert_eq!(s.levels[0].as_ref().unwrap().sigma_file.as_deref(), Some(files[0].as_str()));
        let back = OwnerState::load(&path).unwrap();
        assert_eq!(back.levels, s.levels);
        // A new level 0 replaces the old one: both sidecars while the old still holds level 1.
        s.levels[0] = Some(entry(0, 5));
        s.persist().unwrap();
        assert_eq!(sigma_files_of(&path).len(), 2);
        s.levels = vec![None, None, Some(entry(2, 8))];
        s.persist().unwrap();
        let now = sigma_files_of(&path);
        assert_eq!(now.len(), 1, "sidecars no level names are deleted");
        assert_eq!(OwnerState::load(&path).unwrap().levels, s.levels);
        // An older file: σ inline, no sidecar.
        let mut v = serde_json::to_value(&s).unwrap();
        v["levels"][2].as_object_mut().unwrap().remove("sigma_file");
        v["levels"][2]["sigma"] = serde_json::json!(level_sigma(8, BIG));
        std::fs::write(&path, v.to_string()).unwrap();
        let mut old = OwnerState::load(&path).unwrap();
        assert_eq!(old.levels[2].as_ref().unwrap().sigma, Some(level_sigma(8, BIG)));
        old.persist().unwrap();
        assert!(!read_json(&path).unwrap().contains("\"sigma\""));
        assert_eq!(OwnerState::load(&path).unwrap().levels, old.levels);
        // A damaged sidecar: an error naming it, never other checksums.
        let (name, side) = sigma_files::sidecars(&path).pop().unwrap();
        let mut bytes = std::fs::read(&side).unwrap();
        bytes[30] ^= 1;
        std::fs::write(&side, &bytes).unwrap();
        let err = format!("{:#}", OwnerState::load(&path).unwrap_err());
        assert!(err.contains(&name), "{err}");
        // A sidecar swapped for another (valid) one under the same name is refused too.
        let (other, _) = sigma_files::encode(&[(WireRun { tag: 3, built_at: 8 }, level_sigma(9, 8))]);
        std::fs::write(&side, &other).unwrap();
        assert!(OwnerState::load(&path).is_err());
    }

    /// A committed write adopts its stash as the sidecar of its new level: no second
    /// copy is written, and the state reloads with the stashed σ.
    #[test]
    fn a_commit_adopts_the_stash_instead_of_writing_the_checksums_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("owner.json");
        let mut s = state(Some(path.clone()));
        let run = WireRun { tag: 2, built_at: 6 };
        let sigma: Vec<Fp> = level_sigma(4, BIG).into_iter().map(|x| field::from_bytes(x.to_le_bytes()).unwrap()).collect();
        s.stash_sigma(run, &sigma).unwrap();
        s.pending = Some(Pending::StoreSealed { run, next: 0, more: vec![] });
        s.persist().unwrap();
        let stash = s.stash_file.clone().unwrap();
        s.levels = vec![None, Some(RunEntry { run, root: B256::ZERO, sigma: Some(sigma_to_u64(&sigma)), sigma_file: None, unchecked: true })];
        s.adopt_stash(&[run]);
        s.pending = None;
        s.drop_sigma();
        s.persist().unwrap();
        assert_eq!(sigma_files_of(&path), vec![stash.clone()], "the stash is the level's sidecar");
        let back = OwnerState::load(&path).unwrap();
        assert_eq!(back.levels[1].as_ref().unwrap().sigma, Some(sigma_to_u64(&sigma)));
        assert_eq!(back.stash_file, None);
    }

    /// A small σ (the new level of most single writes) stays inside the state file: no
    /// sidecar file is written or deleted for it; the stash reloads, the commit adopts
    /// it, a reload finds the level's σ, and once no level names it the state drops it.
    /// A damaged copy inside the file fails the state's own check (the older slot is
    /// read, the state before the save).
    #[test]
    fn small_checksums_stay_inside_the_state_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("owner.json");
        let mut s = state(Some(path.clone()));
        s.persist().unwrap();
        let run = WireRun { tag: 1, built_at: 2 };
        let sigma: Vec<Fp> = level_sigma(3, 4).into_iter().map(|x| field::from_bytes(x.to_le_bytes()).unwrap()).collect();
        s.stash_sigma(run, &sigma).unwrap();
        s.pending = Some(Pending::StoreSealed { run, next: 0, more: vec![] });
        s.persist().unwrap();
        assert!(sigma_files_of(&path).is_empty(), "no sidecar file for a small stash");
        let back = OwnerState::load(&path).unwrap();
        assert_eq!(back.stashed_sigma(run).unwrap(), sigma, "the stash from inside the state file");
        // Committed: the level adopts the stash.
        s.levels = vec![Some(RunEntry { run, root: B256::ZERO, sigma: Some(sigma_to_u64(&sigma)), sigma_file: None, unchecked: false })];
        s.adopt_stash(&[run]);
        s.pending = None;
        s.drop_sigma();
        s.persist().unwrap();
        let back = OwnerState::load(&path).unwrap();
        assert_eq!(back.levels, s.levels);
        assert_eq!(back.levels[0].as_ref().unwrap().sigma, Some(sigma_to_u64(&sigma)));
        assert_eq!(back.inline_sigma.len(), 1);
        assert!(sigma_files_of(&path).is_empty());
        // The level consumed: nothing names the σ, and the state drops it.
        s.levels = vec![None, None];
        s.persist().unwrap();
        assert!(OwnerState::load(&path).unwrap().inline_sigma.is_empty());
        // A level with a large σ beside a small one: one file, one kept inside.
        s.levels = vec![None, Some(RunEntry { run: WireRun { tag: 2, built_at: 4 }, root: B256::ZERO, sigma: Some(level_sigma(5, BIG)), sigma_file: None, unchecked: false })];
        s.persist().unwrap();
        s.stash_sigma(run, &sigma).unwrap();
        s.pending = Some(Pending::StoreSealed { run, next: 0, more: vec![] });
        s.persist().unwrap();
        assert_eq!(sigma_files_of(&path).len(), 1);
        let back = OwnerState::load(&path).unwrap();
        assert_eq!(back.levels, s.levels);
        assert_eq!(back.stashed_sigma(run).unwrap(), sigma);
    }

    /// A pending batch's blocks are in the recent-writes sidecar, not the JSON, and
    /// come back on load; a lost record is a load error, never a wrong block.
    #[test]
    fn a_pending_batch_keeps_its_blocks_in_the_recent_sidecar() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("owner.json");
        let mut s = cached_state(&path);
        s.write_count = 3;
        s.save(&path).unwrap();
        // A refused batch left other blocks under the same numbers: superseded.
        s.record_recent(3, (0..5u64).map(|j| (j, vec![0xAA; 8]))).unwrap();
        let blocks: Vec<(u64, Vec<u8>)> = (0..3u64).map(|j| (10 + j, vec![j as u8 + 1; 8])).collect();
        s.record_recent(3, blocks.clone()).unwrap();
        s.pending = Some(Pending::WriteBatch {
            nonce: 9,
            writes: blocks.iter().map(|(i, b)| PendingWrite { index: *i, block: b.clone().into(), sealed_u: B256::repeat_byte(*i as u8) }).collect(),
            new_root_u: B256::repeat_byte(2),
            runs: vec![],
            file_bytes: None,
            c_snapshot: None,
            rejected: None,
            recent_blocks: Some(blocks_digest(&merkle::block_roots(&blocks.iter().map(|(_, b)| b.as_slice()).collect::<Vec<_>>()))),
        });
        s.persist().unwrap();
        let text = read_json(&path).unwrap();
        assert!(!text.contains("\"block\""), "no blocks in the JSON: {text}");
        assert_eq!(s.pending.as_ref().map(|p| matches!(p, Pending::WriteBatch { writes, .. } if writes[0].block.len() == 8)), Some(true));
        let back = OwnerState::load(&path).unwrap();
        assert_eq!(back.pending, s.pending, "the blocks come back from the sidecar");
        // The sidecar without the batch's last record: an error naming the write.
        let side = PathBuf::from(format!("{}.recent", path.display()));
        let bytes = std::fs::read(&side).unwrap();
        let end = s.recent_disk.unwrap().end as usize;
        std::fs::write(&side, &bytes[..end - (24 + 8 + 32)]).unwrap();
        let err = format!("{:#}", OwnerState::load(&path).unwrap_err());
        assert!(err.contains("write 6"), "{err}");
        // A record replaced under the same number and index: the digest refuses it.
        std::fs::write(&side, &bytes).unwrap();
        let mut other = s.clone();
        other.record_recent(5, [(12, vec![0x55; 8])]).unwrap();
        let err = format!("{:#}", OwnerState::load(&path).unwrap_err());
        assert!(err.contains("differ from those the owner prepared"), "{err}");
    }
}
