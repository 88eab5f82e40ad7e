//! Init (DESIGN §6): `upload_begin`, `upload_blocks` in order, `upload_finish`, which
//! builds C and the trees and makes the deal live.

use super::error::{Result, StoreError};
use super::meta::{DealMeta, DealParams, Phase};
use super::u::{u_disk_bytes, UFiles};
use super::{lock, runs, upload_stream, wlock, Deal, DealState, Store, MAX_READ_BYTES};
use alloy_primitives::B256;
use dpor_core::block::{BlockFormat, MAX_LOG_BLOCKS};
use dpor_core::c_stream::CStream;
use dpor_core::state::{u_records, RunId};
use dpor_core::{code, RunTag};
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

/// The id of the C built at upload.
const C0: RunId = RunId { tag: RunTag::C, built_at: 0 };

fn check_params(p: &DealParams) -> Result<BlockFormat> {
    if p.num_blocks == 0 || !p.num_blocks.is_power_of_two() || p.num_blocks > 1u64 << MAX_LOG_BLOCKS {
        return Err(StoreError::Params(format!("N = {} is not a power of two in 1..=2^{MAX_LOG_BLOCKS}", p.num_blocks)));
    }
    BlockFormat::new(p.block_bytes as usize).map_err(|e| StoreError::Params(e.to_string()))
}

impl Store {
    /// Begins the upload of a new deal, or restarts an unfinished one (from block 0,
    /// possibly with new N and β; the owner must be the same). Allocates U's files in
    /// full.
    ///
    /// Errors: [`StoreError::Params`], [`StoreError::Phase`] if the deal is live,
    /// [`StoreError::Owner`], [`StoreError::Replay`], [`StoreError::DiskFull`] if U and
    /// C would not fit, [`StoreError::Io`].
    pub fn upload_begin(&self, params: DealParams, nonce: u64) -> Result<()> {
        let format = check_params(&params)?;
        let deal = params.deal;
        let entry = {
            let mut map = wlock(&self.deals);
            Arc::clone(map.entry(deal).or_insert_with(|| Arc::new(Deal::default())))
        };
        let _op = lock(&entry.op);
        // A stream of an earlier start of this upload stands for blocks no longer wanted,
        // and a request of it waiting for its turn would wait in vain.
        *lock(&entry.upload_stream) = None;
        entry.upload_epoch.fetch_add(1, Ordering::AcqRel);
        entry.upload_turn.notify_all();
        self.forget_kept_runs(deal);
        let old = super::rlock(&entry.state).as_ref().map(|st| st.meta.clone());
        if let Some(old) = &old {
            if old.phase == Phase::Live {
                return Err(StoreError::Phase(format!("deal {deal} is live; its upload cannot restart")));
            }
            if old.params.owner != params.owner {
                return Err(StoreError::Owner { deal });
            }
            old.check_nonce(nonce)?;
        }
        let dir = self.deal_dir(deal);
        let existing = if old.is_some() { space::existing(&dir) } else { 0 };
        let c_bytes = runs::run_disk_bytes(&format, 2 * params.num_blocks);
        let needed = u_disk_bytes(params.num_blocks, params.block_bytes as u64).saturating_add(c_bytes);
        self.ensure_space(needed.saturating_sub(existing))?;
        std::fs::create_dir_all(&dir).map_err(|e| StoreError::io("create", &dir, 0, e))?;
        let u = match UFiles::create(&dir, params.num_blocks, params.block_bytes as u64, &self.u_open) {
            Ok(u) => u,
            Err(e) => {
                if old.is_none() {
                    let _ = std::fs::remove_dir_all(&dir);
                }
                return Err(e);
            }
        };
        let meta = DealMeta::new(params, nonce);
        self.commit(&meta, old.as_ref(), sled::Batch::default())?;
        *wlock(&entry.state) = Some(DealState { meta, format, dir, u: Some(u), u_tree: None, damaged: None, pending_roots: None, snapshot_saved: Default::default() });
        Ok(())
    }

    /// Stores blocks `start..start+len` of an upload with their σ̃_U, and hands them to
    /// the deal's C stream (`upload_stream.rs`: C built while U arrives) once durable.
    ///
    /// An owner may keep two requests in flight (issue 23 #2), so the later one can
    /// arrive first: a request whose `start` is past the blocks received so far waits
    /// (at most one per deal, at most [`StoreConfig::upload_turn_wait`](super::StoreConfig::upload_turn_wait)) until they reach it, the
    /// upload begins again, or a request of it fails; then it is checked as usual.
    ///
    /// Errors: [`StoreError::UnknownDeal`], [`StoreError::Phase`] if not uploading,
    /// [`StoreError::Replay`], [`StoreError::Range`] if `start` is not the number of
    /// blocks received (after the wait), the lengths differ, or `start + len > N`,
    /// [`StoreError::BlockSize`], [`StoreError::Io`].
    pub fn upload_blocks(&self, deal: u64, nonce: u64, start: u64, blocks: Vec<Vec<u8>>, sealed_u: &[[u8; 32]]) -> Result<()> {
        self.upload_blocks_with_roots(deal, nonce, start, blocks, sealed_u, None)
    }

    /// [`Store::upload_blocks`] with the blocks' block roots (`merkle::block_roots`, in
    /// order) when the caller has them: an upload signed over roots, whose roots the
    /// handler checked against the blocks (issue 23 #3). U's `u.roots` takes them as
    /// they are; a wrong length is [`StoreError::Range`]. Errors: as
    /// [`Store::upload_blocks`].
    pub fn upload_blocks_with_roots(
        &self,
        deal: u64,
        nonce: u64,
        start: u64,
        blocks: Vec<Vec<u8>>,
        sealed_u: &[[u8; 32]],
        roots: Option<&[B256]>,
    ) -> Result<()> {
        let entry = self.deal(deal)?;
        let op = wait_for_turn(&entry, lock(&entry.op), start, self.config.upload_turn_wait.unwrap_or(UPLOAD_TURN_WAIT));
        let out = self.upload_blocks_in_turn(&entry, deal, nonce, start, blocks, sealed_u, roots);
        if out.is_err() {
            // A request after this one would wait in vain.
            entry.upload_epoch.fetch_add(1, Ordering::AcqRel);
        }
        drop(op);
        entry.upload_turn.notify_all();
        out
    }

    // The public call's arguments plus the deal's entry.
    #[allow(clippy::too_many_arguments)]
    fn upload_blocks_in_turn(
        &self,
        entry: &Deal,
        deal: u64,
        nonce: u64,
        start: u64,
        blocks: Vec<Vec<u8>>,
        sealed_u: &[[u8; 32]],
        roots: Option<&[B256]>,
    ) -> Result<()> {
        let mut meta = {
            let g = super::rlock(&entry.state);
            g.as_ref().ok_or(StoreError::UnknownDeal(deal))?.meta.clone()
        };
        let Phase::Uploading { received } = meta.phase else {
            return Err(StoreError::Phase(format!("deal {deal} is live: its upload is finished")));
        };
        meta.check_nonce(nonce)?;
        if start != received {
            return Err(StoreError::Range(format!("batch starts at {start}, {received} blocks received so far")));
        }
        if blocks.len() != sealed_u.len() {
            return Err(StoreError::Range(format!("{} blocks with {} checksums", blocks.len(), sealed_u.len())));
        }
        if let Some(r) = roots.filter(|r| r.len() != blocks.len()) {
            return Err(StoreError::Range(format!("{} blocks with {} block roots", blocks.len(), r.len())));
        }
        let end = start.checked_add(blocks.len() as u64).filter(|e| *e <= meta.num_blocks());
        let Some(end) = end else {
            return Err(StoreError::Range(format!("blocks {start}+{} past N = {}", blocks.len(), meta.num_blocks())));
        };
        let beta = meta.params.block_bytes as usize;
        if let Some(b) = blocks.iter().find(|b| b.len() != beta) {
            return Err(StoreError::BlockSize { got: b.len(), expected: beta });
        }
        let old = meta.clone();
        let format = {
            let g = super::rlock(&entry.state);
            let st = g.as_ref().ok_or(StoreError::UnknownDeal(deal))?;
            st.u()?.write_range(start, &blocks, sealed_u, roots)?;
            st.format
        };
        meta.phase = Phase::Uploading { received: end };
        meta.last_nonce = Some(nonce);
        let log_blocks = meta.log_blocks();
        if let Err(e) = self.commit(&meta, Some(&old), sled::Batch::default()) {
            *lock(&entry.upload_stream) = None;
            return Err(e);
        }
        if let Some(st) = wlock(&entry.state).as_mut() {
            st.meta = meta;
        }
        self.feed_upload_stream(deal, entry, format, log_blocks, start, blocks);
        Ok(())
    }

    /// Hands blocks `start..` (committed) to the deal's C stream: starts one at block 0
    /// if the budget allows, drops it if the blocks do not continue it.
    fn feed_upload_stream(&self, deal: u64, entry: &Deal, format: BlockFormat, log_blocks: u32, start: u64, blocks: Vec<Vec<u8>>) {
        let mut slot = lock(&entry.upload_stream);
        if start == 0 {
            // The old stream's reservation is released before the new one is taken.
            *slot = None;
            let budget = self.config.upload_stream_bytes.unwrap_or(upload_stream::DEFAULT_UPLOAD_STREAM_BYTES);
            *slot = CStream::buffer_bytes(log_blocks, format.width())
                .and_then(|bytes| upload_stream::reserve(&self.upload_streams_used, budget, bytes))
                .and_then(|r| upload_stream::UploadStream::start(deal, format, log_blocks, r));
        }
        let fed = match slot.as_mut() {
            Some(s) => s.next() == start && s.push(start, Arc::new(blocks)),
            None => return,
        };
        if !fed {
            *slot = None;
        }
    }

    /// Finishes an upload: builds the U tree and C (`c_rebuild` of U) with its tree,
    /// and makes the deal live. Returns (root U, C's id, root C).
    ///
    /// Errors: [`StoreError::UnknownDeal`], [`StoreError::Phase`] if not uploading or
    /// not all N blocks arrived, [`StoreError::Replay`], [`StoreError::DiskFull`],
    /// [`StoreError::Io`].
    pub fn upload_finish(&self, deal: u64, nonce: u64) -> Result<(B256, RunId, B256)> {
        let entry = self.deal(deal)?;
        let _op = lock(&entry.op);
        let g = super::rlock(&entry.state);
        let st = g.as_ref().ok_or(StoreError::UnknownDeal(deal))?;
        let mut meta = st.meta.clone();
        let n = meta.num_blocks();
        match meta.phase {
            Phase::Live => return Err(StoreError::Phase(format!("deal {deal} is already live"))),
            Phase::Uploading { received } if received < n => {
                return Err(StoreError::Phase(format!("deal {deal}: {received} of {n} blocks received")))
            }
            Phase::Uploading { .. } => {}
        }
        meta.check_nonce(nonce)?;
        self.ensure_space(runs::run_disk_bytes(&st.format, 2 * n))?;
        let tree = st.u()?.tree(n)?;
        // C from the stream fed while U arrived, or else from U read back.
        let streamed = lock(&entry.upload_stream).take().and_then(upload_stream::UploadStream::finish);
        let mut c = match streamed {
            Some(c) if c.len() as u64 == 2 * n * st.format.width() as u64 => c,
            _ => {
                let blocks = read_u_chunked(st, n)?;
                let records = u_records(&st.format, &blocks)?;
                drop(blocks);
                code::c_rebuild(&records, meta.log_blocks(), st.format.width())?
            }
        };
        self.apply_commit_fault(C0, &mut c, st.format.width());
        let root_c = runs::write_run(&st.dir, C0, &st.format, &c)?;
        // Freeing C's elements (16·N·width bytes, 537 MB for 256 MiB) unmaps them page
        // by page: ≈ 60 ms of the answer's path, left to a thread of its own.
        if std::thread::Builder::new().name("c-free".into()).spawn(move || drop(c)).is_err() {
            tracing::debug!("no thread to free C's buffer: freed here");
        }
        let old = meta.clone();
        meta.phase = Phase::Live;
        meta.last_nonce = Some(nonce);
        meta.root_u = tree.root();
        meta.c = Some((C0, root_c));
        meta.last_answer = Some((nonce, super::meta::LastAnswer::Committed(meta.root_u, C0, root_c)));
        if let Err(e) = self.commit(&meta, Some(&old), sled::Batch::default()) {
            runs::remove_run(&st.dir, C0);
            return Err(e);
        }
        // U was written and read back in large pieces: drop its pages so later 4 KiB
        // writes do not land in large folios (`u.rs`).
        if let Ok(u) = st.u() {
            u.drop_cached_blocks();
        }
        drop(g);
        let mut g = wlock(&entry.state);
        if let Some(st) = g.as_mut() {
            st.meta = meta;
            st.u_tree = Some(tree);
            return Ok((st.meta.root_u, C0, root_c));
        }
        Err(StoreError::UnknownDeal(deal))
    }
}

/// Longest an upload request waits for the request before it ([`Store::upload_blocks`])
/// unless [`StoreConfig::upload_turn_wait`](super::StoreConfig::upload_turn_wait) says otherwise: 60 s.
pub const UPLOAD_TURN_WAIT: Duration = Duration::from_secs(60);

/// Waits (releasing `op` meanwhile) while `entry` is uploading, fewer than `start`
/// blocks are in, no other request of the deal waits, its upload epoch is unchanged
/// and `wait` has not passed; returns `op` held again.
fn wait_for_turn<'a>(entry: &'a Deal, mut op: MutexGuard<'a, ()>, start: u64, wait: Duration) -> MutexGuard<'a, ()> {
    let received = |e: &Deal| match super::rlock(&e.state).as_ref().map(|st| st.meta.phase) {
        Some(Phase::Uploading { received }) => Some(received),
        _ => None,
    };
    if received(entry).is_none_or(|r| r >= start) || entry.upload_waiting.swap(true, Ordering::AcqRel) {
        return op;
    }
    let epoch = entry.upload_epoch.load(Ordering::Acquire);
    let deadline = Instant::now() + wait;
    while received(entry).is_some_and(|r| r < start) && entry.upload_epoch.load(Ordering::Acquire) == epoch {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        op = match entry.upload_turn.wait_timeout(op, left) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        };
    }
    entry.upload_waiting.store(false, Ordering::Release);
    op
}

/// All of U (with a pending update applied), read in pieces of at most
/// [`MAX_READ_BYTES`].
pub(crate) fn read_u_chunked(st: &DealState, n: u64) -> Result<Vec<Vec<u8>>> {
    let per = (MAX_READ_BYTES / st.meta.params.block_bytes.max(1) as u64).max(1);
    let mut out = Vec::with_capacity(n as usize);
    let mut start = 0;
    while start < n {
        let count = per.min(n - start);
        out.extend(st.u()?.read_blocks(start, count)?);
        start += count;
    }
    for p in &st.meta.pending {
        if let Some(slot) = out.get_mut(p.index as usize) {
            *slot = p.block.clone();
        }
    }
    Ok(out)
}

mod space {
    use std::path::Path;

    /// Bytes of the U files already in `dir` (counted by the quota; an upload restart
    /// reuses them).
    pub(super) fn existing(dir: &Path) -> u64 {
        ["u.blocks", "u.sealed", "u.roots"]
            .iter()
            .filter_map(|n| std::fs::metadata(dir.join(n)).ok())
            .map(|m| m.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreConfig;
    use alloy_primitives::Address;

    const DEAL: u64 = 4;

    fn uploading(dir: &std::path::Path) -> Store {
        let store = Store::open(dir, StoreConfig::default()).unwrap();
        let params = DealParams { deal: DEAL, owner: Address::repeat_byte(1), num_blocks: 32, block_bytes: 16 };
        store.upload_begin(params, 1).unwrap();
        store
    }

    fn blocks(from: u8, count: usize) -> Vec<Vec<u8>> {
        (0..count).map(|i| vec![from.wrapping_add(i as u8); 16]).collect()
    }

    /// Sends blocks 13.. (nonce 3) on another thread, waits until it waits for its
    /// turn, and returns its handle.
    fn later_request_waiting(store: &Arc<Store>) -> std::thread::JoinHandle<Result<()>> {
        let s = Arc::clone(store);
        let later = std::thread::spawn(move || s.upload_blocks(DEAL, 3, 13, blocks(13, 19), &[[3; 32]; 19]));
        let entry = store.deal(DEAL).unwrap();
        // Liveness only: the thread reaches the wait at once on any machine.
        for _ in 0..600_000 {
            if entry.upload_waiting.load(Ordering::Acquire) || later.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        assert!(entry.upload_waiting.load(Ordering::Acquire), "the later request does not wait for its turn");
        later
    }

    /// Two requests in flight, the later first: it waits for the earlier one, then both
    /// are stored in order and the upload finishes.
    #[test]
    fn a_request_that_arrives_before_its_predecessor_waits_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(uploading(dir.path()));
        let later = later_request_waiting(&store);
        store.upload_blocks(DEAL, 2, 0, blocks(0, 13), &[[2; 32]; 13]).unwrap();
        later.join().unwrap().unwrap();
        assert_eq!(store.view(DEAL).unwrap().phase, Phase::Uploading { received: 32 });
        store.upload_finish(DEAL, 4).unwrap();
        for i in [0u64, 12, 13, 31] {
            assert_eq!(store.read(DEAL, i).unwrap().0, vec![i as u8; 16]);
        }
    }

    /// The earlier request fails (a block of the wrong size): the waiting one stops
    /// waiting and is refused, and the upload goes on from the blocks stored.
    #[test]
    fn a_waiting_request_is_refused_when_its_predecessor_fails() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(uploading(dir.path()));
        let later = later_request_waiting(&store);
        let mut bad = blocks(0, 13);
        bad[5].push(0);
        assert!(matches!(store.upload_blocks(DEAL, 2, 0, bad, &[[2; 32]; 13]), Err(StoreError::BlockSize { .. })));
        assert!(matches!(later.join().unwrap(), Err(StoreError::Range(_))));
        store.upload_blocks(DEAL, 5, 0, blocks(0, 32), &[[2; 32]; 32]).unwrap();
        store.upload_finish(DEAL, 6).unwrap();
    }

    /// At most one request per deal waits: a second early one is refused at once
    /// (an owner cannot hold the node's threads with many), and as a failed request
    /// of the upload it also ends the first one's wait.
    #[test]
    fn a_second_early_request_does_not_wait() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(uploading(dir.path()));
        let later = later_request_waiting(&store);
        assert!(matches!(store.upload_blocks(DEAL, 9, 20, blocks(20, 2), &[[9; 32]; 2]), Err(StoreError::Range(_))));
        assert!(matches!(later.join().unwrap(), Err(StoreError::Range(_))));
        assert_eq!(store.view(DEAL).unwrap().phase, Phase::Uploading { received: 0 });
    }
}
