//! Resize (App. A.3 of the paper; docs/SCHEME.md §10.5): N becomes N'. U keeps its
//! first min(N, N') blocks and grows with zero blocks (σ̃ = `ZERO_BLOCK_U`); C is
//! rebuilt for N' and H emptied, exactly as [`dpor_core::state::ServerState::resize`].
//!
//! Crash safety follows the module rule (data first, then one flushed record):
//! 1. deferred builds are finished and a pending U update applied (the resize reads
//!    all of U);
//! 2. a growth extends U's files (zero blocks, zero σ̃, the zero block's root), fsync;
//! 3. the new C is built from U and written (`.tmp`, fsync, rename);
//! 4. one flushed record with N', the new C, t = 0, the rebuild count of
//!    [`resized_rebuild_count`], the new rootU: **the commit**;
//! 5. a shrink cuts U's files to N'.
//!
//! A kill -9 before 4 leaves the record at N: U's files longer than N are cut back on
//! open and the new C's file, referenced by nothing, is deleted. After 4, a shrink
//! cut short is finished on open the same way. The old state's runs stay (as after a
//! write) until the owner's next accepted request, and those of the co-signed,
//! posted and disputed digests for as long as they are pinned, so epochs bound to a
//! pre-resize digest can still be proven.

use super::error::{Result, StoreError};
use super::meta::LastAnswer;
use super::upload::read_u_chunked;
use super::{lock, rlock, runs, wlock, Store, WriteOutcome};
use dpor_core::block::MAX_LOG_BLOCKS;
use dpor_core::state::{resized_rebuild_count, u_records, RunId, WriteStep};
use dpor_core::{code, RunTag};

impl Store {
    /// Resizes live deal `deal` to `new_num_blocks` blocks (see the module docs).
    /// Returns the outcome as a C-rebuild: the new C's id and root, and the new rootU.
    /// Durable when it returns.
    ///
    /// Errors (changing nothing): [`StoreError::UnknownDeal`], [`StoreError::Phase`]
    /// before the upload finished, [`StoreError::Replay`], [`StoreError::Params`] if
    /// N' is not a power of two in 1..=2^31 or equals N, [`StoreError::DiskFull`],
    /// [`StoreError::Io`].
    pub fn resize(&self, deal: u64, nonce: u64, new_num_blocks: u64) -> Result<WriteOutcome> {
        let entry = self.deal(deal)?;
        let _op = lock(&entry.op);
        self.apply_pending(&entry)?;
        self.settle_locked(&entry)?;
        // Every level is replaced (their roots would miss anyway): their memory freed now.
        self.forget_kept_runs(deal);
        let g = rlock(&entry.state);
        let st = g.as_ref().ok_or(StoreError::UnknownDeal(deal))?;
        st.require_live()?;
        st.require_intact()?;
        let meta = &st.meta;
        meta.check_nonce(nonce)?;
        let n = meta.num_blocks();
        if new_num_blocks == 0
            || !new_num_blocks.is_power_of_two()
            || new_num_blocks > 1u64 << MAX_LOG_BLOCKS
            || new_num_blocks == n
        {
            return Err(StoreError::Params(format!(
                "cannot resize deal {deal} from N = {n} to {new_num_blocks}: N' must be another power of two in 1..=2^{MAX_LOG_BLOCKS}"
            )));
        }
        let new_log = new_num_blocks.trailing_zeros();
        let rebuilds = resized_rebuild_count(meta.rebuild_count, meta.log_blocks(), meta.write_count, new_log)
            .ok_or_else(|| StoreError::Params("the rebuild count overflows".into()))?;
        let run = RunId { tag: RunTag::C, built_at: rebuilds << new_log };
        let beta = meta.params.block_bytes as u64;
        let grow = new_num_blocks.saturating_sub(n);
        self.ensure_space(
            runs::run_disk_bytes(&st.format, 2 * new_num_blocks)
                .saturating_add(super::u::u_disk_bytes(grow, beta)),
        )?;
        if grow > 0 {
            st.u()?.grow(n, new_num_blocks)?;
        }
        let u = read_u_chunked(st, new_num_blocks)?;
        let records = u_records(&st.format, &u)?;
        drop(u);
        let mut c = code::c_rebuild(&records, new_log, st.format.width())?;
        drop(records);
        self.apply_commit_fault(run, &mut c, st.format.width());
        let root_c = runs::write_run(&st.dir, run, &st.format, &c)?;
        drop(c);
        let tree = st.u()?.tree(new_num_blocks)?;
        let root_u = tree.root();

        let mut new = meta.clone();
        new.params.num_blocks = new_num_blocks;
        new.last_nonce = Some(nonce);
        new.root_u = root_u;
        new.previous = meta.current_runs();
        new.levels.clear();
        new.c = Some((run, root_c));
        new.write_count = 0;
        new.rebuild_count = rebuilds;
        let outcome = WriteOutcome { step: WriteStep::CRebuild, run, run_root: root_c, root_u };
        new.last_answer = Some((nonce, LastAnswer::Written(outcome.clone())));
        drop(g);

        let mut g = wlock(&entry.state);
        let Some(st) = g.as_mut() else {
            return Err(StoreError::UnknownDeal(deal));
        };
        self.commit_runs(st, new, sled::Batch::default(), [run])?;
        // Committed.
        st.u_tree = Some(tree);
        if new_num_blocks < n {
            if let Err(e) = st.u().and_then(|u| u.shrink(new_num_blocks)) {
                tracing::warn!(deal, "resize committed, U files not yet cut to N' (done on open): {e}");
            }
        }
        tracing::info!(deal, from = n, to = new_num_blocks, run = %run, %root_u, "deal resized: C rebuilt for the new N");
        self.gc(&st.meta, &st.dir, false);
        Ok(outcome)
    }
}
