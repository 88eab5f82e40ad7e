//! Garbage collection: a run's files (and its σ̃ entries) are retired once neither
//! the current state, the co-signed digest, the posted digest nor a disputed digest
//! references it: a file of a level's size becomes the deal's spare of its length
//! ([`super::spares`], written over by the next run of that length), any other is
//! deleted. Leftover `.tmp` files are deleted too (no operation of the deal is
//! in flight while it runs: the caller holds the deal's mutation lock or is opening).
//!
//! While a background [`Builder`](super::Builder) runs, the runs found unreferenced
//! are handed to it ([`Trash`]) instead of deleted inside the request: dropping the
//! state before a C-rebuild deletes about 4N coded blocks of files and as many σ̃
//! entries (430 ms at N = 2^16 in `script/bench`, in the write after the rebuild). A
//! dropped run is never referenced again (run ids grow with the write count), so its
//! deletion needs no lock; a kill -9 before it leaves files that the next open's
//! collection deletes.

use super::meta::{self, DealMeta};
use super::runs::{self, TMP_SUFFIX};
use super::spares;
use super::Store;
use dpor_core::state::RunId;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Runs of one deal found unreferenced, waiting for the background builder to delete
/// their files and σ̃ entries.
#[derive(Debug)]
pub(crate) struct Trash {
    deal: u64,
    dir: PathBuf,
    runs: BTreeSet<RunId>,
    /// [`spare_max`] of the deal.
    spare_max: u64,
}

/// The largest run file of the deal of `meta` kept as a spare
/// ([`spares::max_file_bytes`] of its C: 2N coded blocks); 0 (none) if its block size
/// is invalid.
fn spare_max(meta: &DealMeta) -> u64 {
    let cb = dpor_core::block::BlockFormat::new(meta.params.block_bytes as usize).map_or(0, |f| f.coded_block_bytes() as u64);
    spares::max_file_bytes(meta.num_blocks().saturating_mul(2).saturating_mul(cb))
}

/// How many σ̃ entries one sled batch of the background deletion removes (so that no
/// single batch holds sled's log for long).
const SEALED_REMOVALS_PER_BATCH: usize = 4096;

impl Store {
    /// Collects the unreferenced files of one deal in `dir`. With `sweep_sealed`,
    /// also scans every σ̃ entry of the deal (on open; otherwise only those of the
    /// runs deleted now are removed) and deletes the spares over the deal's bound.
    /// Failures are logged, never returned: garbage left behind is collected by a
    /// later pass.
    pub(crate) fn gc(&self, meta: &DealMeta, dir: &Path, sweep_sealed: bool) {
        let deal = meta.params.deal;
        let keep: BTreeSet<RunId> = meta.retained_runs().into_iter().map(|(id, _, _)| id).collect();
        let spare_max = spare_max(meta);
        if sweep_sealed {
            spares::remove_over(dir, spare_max);
        }
        // (Deferred builds are current runs, so their files, once renamed, are kept.)
        let mut dropped = BTreeSet::new();
        let mut removed_any = false;
        match std::fs::read_dir(dir) {
            Ok(entries) => {
                for entry in entries.flatten() {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    let stale = if let Some(base) = name.strip_suffix(TMP_SUFFIX) {
                        // A deferred build in flight writes under `.tmp` names.
                        runs::parse_name(base).is_none_or(|run| !meta.is_building(run))
                    } else if let Some(run) = runs::parse_name(&name) {
                        if !keep.contains(&run) {
                            dropped.insert(run);
                        }
                        false
                    } else {
                        false
                    };
                    if stale {
                        match std::fs::remove_file(entry.path()) {
                            Ok(()) => removed_any = true,
                            Err(e) => tracing::warn!(deal, file = %entry.path().display(), "gc: {e}"),
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(deal, dir = %dir.display(), "gc: {e}"),
        }
        if !sweep_sealed && !dropped.is_empty() && self.builder_running() {
            if removed_any {
                if let Err(e) = runs::sync_dir(dir) {
                    tracing::warn!(deal, "gc: {e}");
                }
            }
            super::lock(&self.trash).push(Trash { deal, dir: dir.to_path_buf(), runs: dropped, spare_max });
            self.build_signal.notify();
            return;
        }
        for run in &dropped {
            runs::retire_run(dir, *run, spare_max, false);
            removed_any = true;
        }
        if removed_any {
            if let Err(e) = runs::sync_dir(dir) {
                tracing::warn!(deal, "gc: {e}");
            }
        }
        let mut batch = sled::Batch::default();
        let mut n = 0usize;
        let prefixes: Vec<Vec<u8>> = if sweep_sealed {
            vec![meta::sealed_deal_prefix(deal).to_vec()]
        } else {
            dropped.iter().map(|r| meta::sealed_run_prefix(deal, *r).to_vec()).collect()
        };
        for prefix in prefixes {
            for kv in self.db.scan_prefix(prefix) {
                match kv {
                    Ok((k, _)) => {
                        if meta::run_of_sealed_key(&k).is_none_or(|r| !keep.contains(&r)) {
                            batch.remove(k);
                            n += 1;
                        }
                    }
                    Err(e) => tracing::warn!(deal, "gc: {e}"),
                }
            }
        }
        if n > 0 {
            if let Err(e) = self.db.apply_batch(batch) {
                tracing::warn!(deal, "gc: {e}");
            }
        }
    }

    /// Retires the runs handed to the background builder by [`Store::gc`]: its files
    /// kept as spares or deleted ([`runs::retire_run`]), then its σ̃ entries deleted
    /// in batches of [`SEALED_REMOVALS_PER_BATCH`]. Takes no deal lock. Failures are
    /// logged: what is left is collected on the next open.
    pub(crate) fn empty_trash(&self) {
        let items = std::mem::take(&mut *super::lock(&self.trash));
        for Trash { deal, dir, runs: dropped, spare_max } in items {
            for run in &dropped {
                runs::retire_run(&dir, *run, spare_max, true);
            }
            if let Err(e) = runs::sync_dir(&dir) {
                tracing::debug!(deal, "gc: {e}");
            }
            for run in &dropped {
                let mut batch = sled::Batch::default();
                let mut n = 0usize;
                for kv in self.db.scan_prefix(meta::sealed_run_prefix(deal, *run)) {
                    match kv {
                        Ok((k, _)) => {
                            batch.remove(k);
                            n += 1;
                        }
                        Err(e) => tracing::warn!(deal, "gc: {e}"),
                    }
                    if n == SEALED_REMOVALS_PER_BATCH {
                        if let Err(e) = self.db.apply_batch(std::mem::take(&mut batch)) {
                            tracing::warn!(deal, "gc: {e}");
                        }
                        n = 0;
                    }
                }
                if n > 0 {
                    if let Err(e) = self.db.apply_batch(batch) {
                        tracing::warn!(deal, "gc: {e}");
                    }
                }
            }
        }
    }
}
