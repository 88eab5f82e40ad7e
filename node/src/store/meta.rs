//! A deal's metadata record ([`DealMeta`]) and the sled keys.
//!
//! One sled value per deal, key `b'd' ‖ u64be(deal)`, holds everything that must change
//! atomically with an operation: parameters, phase, nonce, counters, the manifest of
//! live runs with their roots, the U root, the pinned digests and the pending U update.
//! Owner-supplied σ̃ of run positions live under `b's' ‖ u64be(deal) ‖ u32be(tag) ‖
//! u64be(built_at) ‖ u64be(position)` (32-byte values).

use super::codec::{Reader, Writer};
use super::error::{Result, StoreError};
use alloy_primitives::{Address, B256};
use dpor_core::audit::RunTag;
use dpor_core::digest::Digest;
use dpor_core::state::RunId;

/// Format version byte of [`DealMeta`] values written now. Version 1 (still read)
/// lacks the last answer and the previous state's runs; version 2 (still read) holds
/// at most one pending U update and no batch answer; version 3 (still read) has no
/// deferred builds; version 4 (still read) keeps no co-signed digests beyond the latest
/// one ([`DealMeta::unposted`]); version 5 (still read) keeps a pending C build's
/// snapshot blocks in sled only ([`SNAPSHOT_PREFIX`]), with no count of them in a file
/// ([`DealMeta::snapshot_records`]).
const META_VERSION: u8 = 6;

/// Most co-signed digests of one deal that may wait, not yet posted, each pinning its
/// runs ([`DealMeta::unposted`]); a further co-signature is refused until one is posted.
/// The chain agent posts the newest one itself as soon as two wait, so the bound is
/// reached only while the chain cannot be reached or a resize is not on chain yet.
pub const MAX_UNPOSTED_COSIGNS: usize = 8;

/// A digest this node co-signed, kept with the signatures it was given and gave
/// ([`DealMeta::unposted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CosignRecord {
    /// The digest.
    pub digest: Digest,
    /// What the node signed: a plain digest (`postDigest`) or a resize of it
    /// (`resizeDeal`, whose signatures are over another hash).
    pub kind: CosignKind,
    /// The owner's 65-byte signature over what the node signed (empty if the request
    /// carried none: a `CosignResize`, or a record made by [`super::Store::check_cosign`]).
    pub owner_sig: Vec<u8>,
    /// The node's own 65-byte signature (empty for [`super::Store::check_cosign`]).
    pub provider_sig: Vec<u8>,
}

/// What kind of co-signature a [`CosignRecord`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CosignKind {
    /// A digest for `postDigest` (EIP-712 `Digest`).
    Digest,
    /// The first digest of a resize for `resizeDeal` (EIP-712 `Resize`).
    Resize,
}

impl CosignRecord {
    /// Whether the node itself can post it with `postDigest` (a plain digest whose two
    /// signatures it holds).
    pub fn postable(&self) -> bool {
        self.kind == CosignKind::Digest && !self.owner_sig.is_empty() && !self.provider_sig.is_empty()
    }
}

/// Prefix of deal records.
pub(crate) const DEAL_PREFIX: u8 = b'd';
/// Prefix of run σ̃ entries.
pub(crate) const SEALED_PREFIX: u8 = b's';
/// Prefix of the U blocks a deferred C-rebuild reads instead of U's files (the value
/// of U[i] at the rebuild's write, saved before a later write overwrites it), as
/// stores with records before version 6 kept them; now they are in a file per deal
/// (`snapshot.rs`), and opening a store moves these entries there.
pub(crate) const SNAPSHOT_PREFIX: u8 = b'v';

/// The sled key prefix of one deal's snapshot blocks.
pub(crate) fn snapshot_deal_prefix(deal: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = SNAPSHOT_PREFIX;
    k[1..].copy_from_slice(&deal.to_be_bytes());
    k
}

/// The sled key of the snapshot block of U[index] (records before version 6; tests
/// write such entries to check that they are moved).
#[cfg(test)]
pub(crate) fn snapshot_key(deal: u64, index: u64) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[..9].copy_from_slice(&snapshot_deal_prefix(deal));
    k[9..].copy_from_slice(&index.to_be_bytes());
    k
}

/// The sled key of a deal's record.
pub(crate) fn deal_key(deal: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = DEAL_PREFIX;
    k[1..].copy_from_slice(&deal.to_be_bytes());
    k
}

/// The sled key prefix of one deal's σ̃ entries (all runs).
pub(crate) fn sealed_deal_prefix(deal: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = SEALED_PREFIX;
    k[1..].copy_from_slice(&deal.to_be_bytes());
    k
}

/// The sled key prefix of one run's σ̃ entries.
pub(crate) fn sealed_run_prefix(deal: u64, run: RunId) -> [u8; 21] {
    let mut k = [0u8; 21];
    k[..9].copy_from_slice(&sealed_deal_prefix(deal));
    k[9..13].copy_from_slice(&run.tag.0.to_be_bytes());
    k[13..21].copy_from_slice(&run.built_at.to_be_bytes());
    k
}

/// The sled key of the σ̃ of position `pos` of a run.
pub(crate) fn sealed_key(deal: u64, run: RunId, pos: u64) -> [u8; 29] {
    let mut k = [0u8; 29];
    k[..21].copy_from_slice(&sealed_run_prefix(deal, run));
    k[21..].copy_from_slice(&pos.to_be_bytes());
    k
}

/// The run named by a σ̃ key, if it is one.
pub(crate) fn run_of_sealed_key(key: &[u8]) -> Option<RunId> {
    if key.len() != 29 || key[0] != SEALED_PREFIX {
        return None;
    }
    let tag = u32::from_be_bytes(key[9..13].try_into().ok()?);
    let built_at = u64::from_be_bytes(key[13..21].try_into().ok()?);
    Some(RunId { tag: RunTag(tag), built_at })
}

/// A deal's fixed parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DealParams {
    /// The deal id (as on chain).
    pub deal: u64,
    /// The owner's address (requests are authenticated against it upstream).
    pub owner: Address,
    /// N, the padded block count: a power of two in 1..=2^31.
    pub num_blocks: u64,
    /// β, bytes per data block, in 1..=1 MiB.
    pub block_bytes: u32,
}

/// Where a deal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The upload is under way: blocks `0..received` are stored.
    Uploading {
        /// Blocks stored so far.
        received: u64,
    },
    /// Uploaded: U, C and H exist; writes are accepted.
    Live,
}

/// A committed write of U not yet known to be on disk in `u.*` files: re-applied
/// (idempotently) on open. A batch leaves one per distinct index (its last value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingU {
    pub(crate) index: u64,
    pub(crate) block: Vec<u8>,
    pub(crate) sealed: [u8; 32],
}

/// A run of the current state whose build is deferred (deamortized rebuilds, §6.1 of
/// the paper; docs/SCHEME.md §10.3): the write that made it is committed and
/// acknowledged, and the run is built later, from inputs that stay on disk until
/// then, by the background builder or by the first operation that needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Build {
    /// The run (its root is zero in the manifest until it is built).
    pub(crate) run: RunId,
    /// What it is built from.
    pub(crate) inputs: BuildInputs,
}

/// The inputs of a deferred build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BuildInputs {
    /// HAdd at counter `t` of the record (`index`, `block`) with the consumed levels
    /// 0..ℓ−1, whose runs (`consumed`, ascending level) are kept until it is built.
    Level { t: u64, index: u64, block: Vec<u8>, consumed: Vec<RunId> },
    /// CRebuild of U as of the write that triggered it: U's files overlaid with the
    /// snapshot blocks ([`snapshot_key`]) that later writes saved before overwriting.
    C,
}

/// The answer of the last write or upload finish, kept (with its nonce) so that an
/// owner who lost it to a crash can ask for it again (`Request::Outcome`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LastAnswer {
    /// A write's outcome.
    Written(super::WriteOutcome),
    /// The upload finish: (root U, C's id, root C).
    Committed(B256, RunId, B256),
    /// A batch of writes' outcome.
    WrittenBatch(super::BatchOutcome),
}

/// Everything committed about one deal (one sled value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DealMeta {
    pub(crate) params: DealParams,
    pub(crate) phase: Phase,
    /// `None` before any owner operation was accepted.
    pub(crate) last_nonce: Option<u64>,
    pub(crate) write_count: u64,
    pub(crate) rebuild_count: u64,
    pub(crate) root_u: B256,
    /// C: its id and root (`None` while uploading).
    pub(crate) c: Option<(RunId, B256)>,
    /// Filled levels ascending: (level, id, root).
    pub(crate) levels: Vec<(u32, RunId, B256)>,
    pub(crate) cosigned: Option<Digest>,
    pub(crate) posted: Option<Digest>,
    /// Every co-signed digest with a version above the posted one, ascending version
    /// (issue 22): the owner holds the node's signature on each and could still post
    /// it (`postDigest` and `resizeDeal` accept any version above the posted one) and
    /// dispute it, so each pins its runs until a digest of at least its version is
    /// posted ([`Store::set_posted`](super::Store::set_posted)). At most
    /// [`MAX_UNPOSTED_COSIGNS`].
    pub(crate) unposted: Vec<CosignRecord>,
    /// Open disputes: (dispute id, digest), ascending id.
    pub(crate) disputes: Vec<(u64, Digest)>,
    /// Committed U updates not yet applied to the `u.*` files, ascending index, one
    /// per index.
    pub(crate) pending: Vec<PendingU>,
    /// The nonce and answer of the last write or upload finish.
    pub(crate) last_answer: Option<(u64, LastAnswer)>,
    /// The runs of the state before the last write (id, size, root): kept until the
    /// owner's next accepted request, which shows it has the write's answer and moved
    /// on (an owner that did not get the answer still references these runs).
    pub(crate) previous: Vec<(RunId, u64, B256)>,
    /// Deferred builds, oldest first (their runs' roots are zero until built).
    pub(crate) building: Vec<Build>,
    /// How many records of the deal's C snapshot file count (`snapshot.rs`): U's
    /// blocks as of a pending C-rebuild, saved before later writes overwrote them.
    /// Zero when no C build is pending.
    pub(crate) snapshot_records: u64,
}

impl DealMeta {
    /// A fresh deal at the start of its upload.
    pub(crate) fn new(params: DealParams, nonce: u64) -> Self {
        Self {
            params,
            phase: Phase::Uploading { received: 0 },
            last_nonce: Some(nonce),
            write_count: 0,
            rebuild_count: 0,
            root_u: B256::ZERO,
            c: None,
            levels: Vec::new(),
            cosigned: None,
            posted: None,
            unposted: Vec::new(),
            disputes: Vec::new(),
            pending: Vec::new(),
            last_answer: None,
            previous: Vec::new(),
            building: Vec::new(),
            snapshot_records: 0,
        }
    }

    /// N.
    pub(crate) fn num_blocks(&self) -> u64 {
        self.params.num_blocks
    }

    /// k = log2 N.
    pub(crate) fn log_blocks(&self) -> u32 {
        self.params.num_blocks.trailing_zeros()
    }

    /// Total writes: rebuilds·N + t.
    pub(crate) fn total_writes(&self) -> u64 {
        self.rebuild_count.saturating_mul(self.num_blocks()).saturating_add(self.write_count)
    }

    /// Checks `nonce` against the last accepted one.
    pub(crate) fn check_nonce(&self, nonce: u64) -> Result<()> {
        match self.last_nonce {
            Some(last) if nonce <= last => Err(StoreError::Replay { nonce, last }),
            _ => Ok(()),
        }
    }

    /// The current state's runs with (size in coded blocks, root): C, then levels
    /// ascending.
    pub(crate) fn current_runs(&self) -> Vec<(RunId, u64, B256)> {
        let mut out = Vec::new();
        if let Some((id, root)) = self.c {
            out.push((id, 2 * self.num_blocks(), root));
        }
        for (level, id, root) in &self.levels {
            out.push((*id, 2u64 << level, *root));
        }
        out
    }

    /// Whether `run` is a deferred build not yet built.
    pub(crate) fn is_building(&self, run: RunId) -> bool {
        self.building.iter().any(|b| b.run == run)
    }

    /// Whether a deferred C-rebuild is pending (writes must save U's old blocks).
    pub(crate) fn c_building(&self) -> bool {
        self.building.iter().any(|b| b.inputs == BuildInputs::C)
    }

    /// Drops the deferred builds whose runs neither the current state nor the previous
    /// one holds any longer (levels a C-rebuild discarded before they were built).
    /// Returns whether a C-rebuild was among them.
    pub(crate) fn drop_obsolete_builds(&mut self) -> bool {
        let live: Vec<RunId> = self.current_runs().into_iter().chain(self.previous.iter().copied()).map(|(id, _, _)| id).collect();
        let before = self.c_building();
        self.building.retain(|b| live.contains(&b.run));
        let dropped_c = before && !self.c_building();
        if dropped_c {
            // Its snapshot blocks are of no use any more.
            self.snapshot_records = 0;
        }
        dropped_c
    }

    /// Every run the deal must keep: the current state's, the previous state's while
    /// the owner has not confirmed the last write ([`DealMeta::previous`]), and those of
    /// the co-signed digests not posted yet ([`DealMeta::unposted`]), the posted and
    /// the disputed digests (a run of a pinned digest that this store never built is
    /// listed too; it simply has no file).
    pub(crate) fn retained_runs(&self) -> Vec<(RunId, u64, B256)> {
        let mut out = self.current_runs();
        for r in &self.previous {
            if !out.iter().any(|(id, _, _)| *id == r.0) {
                out.push(*r);
            }
        }
        let pinned = self
            .cosigned
            .iter()
            .chain(self.unposted.iter().map(|c| &c.digest))
            .chain(self.posted.iter())
            .chain(self.disputes.iter().map(|(_, d)| d));
        for d in pinned {
            for r in d.run_ids() {
                if !out.iter().any(|(id, _, _)| *id == r.0) {
                    out.push(r);
                }
            }
        }
        // The inputs of deferred builds (kept until the build is done).
        for b in &self.building {
            if let BuildInputs::Level { consumed, .. } = &b.inputs {
                for (j, id) in consumed.iter().enumerate() {
                    if !out.iter().any(|(x, _, _)| x == id) {
                        out.push((*id, 2u64 << j, B256::ZERO));
                    }
                }
            }
        }
        out
    }

    /// Serializes the record.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(META_VERSION);
        w.u64(self.params.deal);
        w.raw(self.params.owner.as_slice());
        w.u64(self.params.num_blocks);
        w.u32(self.params.block_bytes);
        match self.phase {
            Phase::Uploading { received } => {
                w.u8(0);
                w.u64(received);
            }
            Phase::Live => w.u8(1),
        }
        match self.last_nonce {
            Some(n) => {
                w.u8(1);
                w.u64(n);
            }
            None => w.u8(0),
        }
        w.u64(self.write_count);
        w.u64(self.rebuild_count);
        w.raw(self.root_u.as_slice());
        match &self.c {
            Some((id, root)) => {
                w.u8(1);
                run_id(&mut w, id);
                w.raw(root.as_slice());
            }
            None => w.u8(0),
        }
        w.u32(self.levels.len() as u32);
        for (level, id, root) in &self.levels {
            w.u32(*level);
            run_id(&mut w, id);
            w.raw(root.as_slice());
        }
        for d in [&self.cosigned, &self.posted] {
            match d {
                Some(d) => {
                    w.u8(1);
                    w.digest(d);
                }
                None => w.u8(0),
            }
        }
        w.u32(self.disputes.len() as u32);
        for (id, d) in &self.disputes {
            w.u64(*id);
            w.digest(d);
        }
        w.u32(self.pending.len() as u32);
        for p in &self.pending {
            w.u64(p.index);
            w.bytes(&p.block);
            w.raw(&p.sealed);
        }
        match &self.last_answer {
            Some((nonce, a)) => {
                w.u8(1);
                w.u64(*nonce);
                match a {
                    LastAnswer::Written(o) => {
                        w.u8(0);
                        match o.step {
                            dpor_core::state::WriteStep::Level(l) => {
                                w.u8(0);
                                w.u32(l);
                            }
                            dpor_core::state::WriteStep::CRebuild => {
                                w.u8(1);
                                w.u32(0);
                            }
                        }
                        run_id(&mut w, &o.run);
                        w.raw(o.run_root.as_slice());
                        w.raw(o.root_u.as_slice());
                    }
                    LastAnswer::Committed(root_u, c, root_c) => {
                        w.u8(1);
                        w.raw(root_u.as_slice());
                        run_id(&mut w, c);
                        w.raw(root_c.as_slice());
                    }
                    LastAnswer::WrittenBatch(b) => {
                        w.u8(2);
                        w.u64(b.count);
                        w.raw(b.root_u.as_slice());
                        w.u32(b.runs.len() as u32);
                        for (id, root) in &b.runs {
                            run_id(&mut w, id);
                            w.raw(root.as_slice());
                        }
                    }
                }
            }
            None => w.u8(0),
        }
        w.u32(self.previous.len() as u32);
        for (id, size, root) in &self.previous {
            run_id(&mut w, id);
            w.u64(*size);
            w.raw(root.as_slice());
        }
        w.u32(self.building.len() as u32);
        for b in &self.building {
            run_id(&mut w, &b.run);
            match &b.inputs {
                BuildInputs::C => w.u8(0),
                BuildInputs::Level { t, index, block, consumed } => {
                    w.u8(1);
                    w.u64(*t);
                    w.u64(*index);
                    w.bytes(block);
                    w.u32(consumed.len() as u32);
                    for id in consumed {
                        run_id(&mut w, id);
                    }
                }
            }
        }
        w.u32(self.unposted.len() as u32);
        for c in &self.unposted {
            w.digest(&c.digest);
            w.u8(match c.kind {
                CosignKind::Digest => 0,
                CosignKind::Resize => 1,
            });
            w.bytes(&c.owner_sig);
            w.bytes(&c.provider_sig);
        }
        w.u64(self.snapshot_records);
        w.buf
    }

    /// Parses a record; [`StoreError::Corrupt`] on any inconsistency.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes, "deal record");
        let v = r.u8()?;
        if !(1..=META_VERSION).contains(&v) {
            return Err(StoreError::Corrupt(format!("deal record version {v}")));
        }
        let params = DealParams { deal: r.u64()?, owner: r.address()?, num_blocks: r.u64()?, block_bytes: r.u32()? };
        let phase = match r.u8()? {
            0 => Phase::Uploading { received: r.u64()? },
            1 => Phase::Live,
            x => return Err(StoreError::Corrupt(format!("deal phase {x}"))),
        };
        let last_nonce = if flag(&mut r)? { Some(r.u64()?) } else { None };
        let write_count = r.u64()?;
        let rebuild_count = r.u64()?;
        let root_u = r.b256()?;
        let c = if flag(&mut r)? { Some((read_run_id(&mut r)?, r.b256()?)) } else { None };
        let n = r.count(64)?;
        let levels = (0..n).map(|_| Ok((r.u32()?, read_run_id(&mut r)?, r.b256()?))).collect::<Result<Vec<_>>>()?;
        let cosigned = if flag(&mut r)? { Some(r.digest()?) } else { None };
        let posted = if flag(&mut r)? { Some(r.digest()?) } else { None };
        let n = r.count(u32::MAX)?;
        let mut disputes = Vec::new();
        for _ in 0..n {
            disputes.push((r.u64()?, r.digest()?));
        }
        let pending = if v >= 3 {
            let n = r.count(u32::MAX)?;
            (0..n).map(|_| Ok(PendingU { index: r.u64()?, block: r.bytes()?, sealed: r.array()? })).collect::<Result<Vec<_>>>()?
        } else if flag(&mut r)? {
            vec![PendingU { index: r.u64()?, block: r.bytes()?, sealed: r.array()? }]
        } else {
            Vec::new()
        };
        let (last_answer, previous) = if v >= 2 { (read_last_answer(&mut r)?, read_previous(&mut r)?) } else { (None, Vec::new()) };
        let building = if v >= 4 { read_building(&mut r)? } else { Vec::new() };
        // Before version 5 only the latest co-signed digest was kept (with no
        // signatures): it still pins its runs if it is not posted.
        let unposted = if v >= 5 {
            read_unposted(&mut r)?
        } else {
            match &cosigned {
                Some(d) if posted.as_ref().is_none_or(|p| p.version < d.version) => vec![CosignRecord {
                    digest: d.clone(),
                    kind: CosignKind::Digest,
                    owner_sig: Vec::new(),
                    provider_sig: Vec::new(),
                }],
                _ => Vec::new(),
            }
        };
        let snapshot_records = if v >= 6 { r.u64()? } else { 0 };
        r.finish()?;
        let meta = Self {
            params,
            phase,
            last_nonce,
            write_count,
            rebuild_count,
            root_u,
            c,
            levels,
            cosigned,
            posted,
            unposted,
            disputes,
            pending,
            last_answer,
            previous,
            building,
            snapshot_records,
        };
        meta.check()?;
        Ok(meta)
    }

    /// Internal consistency of a decoded record.
    fn check(&self) -> Result<()> {
        let p = &self.params;
        if p.num_blocks == 0 || !p.num_blocks.is_power_of_two() || p.num_blocks > 1 << 31 {
            return Err(StoreError::Corrupt(format!("deal {}: N = {}", p.deal, p.num_blocks)));
        }
        if p.block_bytes == 0 || p.block_bytes as usize > dpor_core::block::MAX_BLOCK_BYTES {
            return Err(StoreError::Corrupt(format!("deal {}: β = {}", p.deal, p.block_bytes)));
        }
        if self.write_count >= p.num_blocks {
            return Err(StoreError::Corrupt(format!("deal {}: t = {} ≥ N", p.deal, self.write_count)));
        }
        let filled: Vec<u32> = self.levels.iter().map(|l| l.0).collect();
        let expected: Vec<u32> = (0..64).filter(|l| (self.write_count >> l) & 1 == 1).collect();
        if filled != expected {
            return Err(StoreError::Corrupt(format!("deal {}: levels {filled:?} for t = {}", p.deal, self.write_count)));
        }
        if (self.phase == Phase::Live) != self.c.is_some() {
            return Err(StoreError::Corrupt(format!("deal {}: C and phase disagree", p.deal)));
        }
        for pending in &self.pending {
            if pending.index >= p.num_blocks || pending.block.len() != p.block_bytes as usize {
                return Err(StoreError::Corrupt(format!("deal {}: bad pending update", p.deal)));
            }
        }
        if self.pending.windows(2).any(|w| w[0].index >= w[1].index) {
            return Err(StoreError::Corrupt(format!("deal {}: pending updates out of order", p.deal)));
        }
        if self.snapshot_records > p.num_blocks || (self.snapshot_records > 0 && !self.c_building()) {
            return Err(StoreError::Corrupt(format!("deal {}: {} snapshot blocks", p.deal, self.snapshot_records)));
        }
        Ok(())
    }
}

fn flag(r: &mut Reader<'_>) -> Result<bool> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        x => Err(StoreError::Corrupt(format!("flag byte {x}"))),
    }
}

fn read_last_answer(r: &mut Reader<'_>) -> Result<Option<(u64, LastAnswer)>> {
    if !flag(r)? {
        return Ok(None);
    }
    let nonce = r.u64()?;
    let answer = match r.u8()? {
        0 => {
            let step = match (r.u8()?, r.u32()?) {
                (0, l) => dpor_core::state::WriteStep::Level(l),
                (1, _) => dpor_core::state::WriteStep::CRebuild,
                (x, _) => return Err(StoreError::Corrupt(format!("write step kind {x}"))),
            };
            let run = read_run_id(r)?;
            LastAnswer::Written(super::WriteOutcome { step, run, run_root: r.b256()?, root_u: r.b256()? })
        }
        1 => LastAnswer::Committed(r.b256()?, read_run_id(r)?, r.b256()?),
        2 => {
            let count = r.u64()?;
            let root_u = r.b256()?;
            let n = r.count(66)?;
            let runs = (0..n).map(|_| Ok((read_run_id(r)?, r.b256()?))).collect::<Result<Vec<_>>>()?;
            LastAnswer::WrittenBatch(super::BatchOutcome { count, root_u, runs })
        }
        x => return Err(StoreError::Corrupt(format!("answer kind {x}"))),
    };
    Ok(Some((nonce, answer)))
}

fn read_unposted(r: &mut Reader<'_>) -> Result<Vec<CosignRecord>> {
    let n = r.count(MAX_UNPOSTED_COSIGNS as u32)?;
    (0..n)
        .map(|_| {
            let digest = r.digest()?;
            let kind = match r.u8()? {
                0 => CosignKind::Digest,
                1 => CosignKind::Resize,
                x => return Err(StoreError::Corrupt(format!("co-signature kind {x}"))),
            };
            Ok(CosignRecord { digest, kind, owner_sig: r.bytes()?, provider_sig: r.bytes()? })
        })
        .collect()
}

fn read_previous(r: &mut Reader<'_>) -> Result<Vec<(RunId, u64, B256)>> {
    let n = r.count(65)?;
    (0..n).map(|_| Ok((read_run_id(r)?, r.u64()?, r.b256()?))).collect()
}

fn read_building(r: &mut Reader<'_>) -> Result<Vec<Build>> {
    let n = r.count(66)?;
    (0..n)
        .map(|_| {
            let run = read_run_id(r)?;
            let inputs = match r.u8()? {
                0 => BuildInputs::C,
                1 => {
                    let (t, index, block) = (r.u64()?, r.u64()?, r.bytes()?);
                    let m = r.count(64)?;
                    let consumed = (0..m).map(|_| read_run_id(r)).collect::<Result<Vec<_>>>()?;
                    BuildInputs::Level { t, index, block, consumed }
                }
                x => return Err(StoreError::Corrupt(format!("build kind {x}"))),
            };
            Ok(Build { run, inputs })
        })
        .collect()
}

fn run_id(w: &mut Writer, id: &RunId) {
    w.u32(id.tag.0);
    w.u64(id.built_at);
}

fn read_run_id(r: &mut Reader<'_>) -> Result<RunId> {
    Ok(RunId { tag: RunTag(r.u32()?), built_at: r.u64()? })
}
