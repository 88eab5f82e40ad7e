//! Garbage collection: a run's files (and its σ̃ entries) are deleted once neither
//! the current state, the co-signed digest, the posted digest nor a disputed digest
//! references it. Leftover `.tmp` files are deleted too (no operation of the deal is
//! in flight while it runs: the caller holds the deal's mutation lock or is opening).

use super::meta::{self, DealMeta};
use super::runs::{self, TMP_SUFFIX};
use super::Store;
use dpor_core::state::RunId;
use std::collections::BTreeSet;
use std::path::Path;

impl Store {
    /// Collects the unreferenced files of one deal in `dir`. With `sweep_sealed`,
    /// also scans every σ̃ entry of the deal (on open; otherwise only those of the
    /// runs deleted now are removed). Failures are logged, never returned: garbage
    /// left behind is collected by a later pass.
    pub(crate) fn gc(&self, meta: &DealMeta, dir: &Path, sweep_sealed: bool) {
        let deal = meta.params.deal;
        let keep: BTreeSet<RunId> = meta.retained_runs().into_iter().map(|(id, _, _)| id).collect();
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
                        let stale = !keep.contains(&run);
                        if stale {
                            dropped.insert(run);
                        }
                        stale
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
}
