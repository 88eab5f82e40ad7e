//! Opening a store: load every deal record, re-apply pending U updates, rebuild the
//! U trees, and delete what no record references (run files, `.tmp` files, σ̃
//! entries, deal folders).

use super::error::{Result, StoreError};
use super::meta::{self, DealMeta, Phase};
use super::u::UFiles;
use super::{runs, snapshot, Deal, DealState, Store, StoreConfig};
use dpor_core::block::BlockFormat;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, RwLock};

/// Longest [`open_metadata_db`] waits for a lock a closing handle still holds.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens the store's sled database, `dir/meta.sled`.
///
/// sled holds an exclusive `flock` on the database for as long as any part of it is
/// alive, and a dropped handle releases it only when sled's background threads have
/// finished with it, a moment after the drop returns. So reopening a store in the same
/// process right after dropping it (tests do; a restarted process never needs to, the
/// kernel releases a dead process's lock at once) can find the lock still held. This
/// retries while the lock is held, waiting 5 ms, then twice as long each time up to
/// 320 ms, for at most 10 s in total, then gives up.
///
/// Errors: [`StoreError::Sled`] if the database cannot be opened; if the lock is still
/// held after 10 s, the message says another process (e.g. a second dpor-node on the
/// same data dir) is using it.
pub fn open_metadata_db(dir: &Path) -> Result<sled::Db> {
    let path = dir.join("meta.sled");
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        match sled::Config::new().path(&path).open() {
            Ok(db) => return Ok(db),
            Err(sled::Error::Io(e)) if e.to_string().contains("could not acquire lock") => {
                if started.elapsed() >= LOCK_WAIT {
                    return Err(StoreError::Sled(sled::Error::Io(std::io::Error::new(
                        e.kind(),
                        format!("{e}: the store is in use by another process (is another dpor-node running on this data dir?)"),
                    ))));
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(320));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// [`Store::open`].
pub(crate) fn open(dir: &Path, config: StoreConfig) -> Result<Store> {
    let deals_dir = dir.join("deals");
    std::fs::create_dir_all(&deals_dir).map_err(|e| StoreError::io("create", &deals_dir, 0, e))?;
    let db = open_metadata_db(dir)?;
    let store = Store {
        dir: dir.to_path_buf(),
        db,
        deals: RwLock::new(BTreeMap::new()),
        commit_fault: Default::default(),
        build_signal: Default::default(),
        builders: Default::default(),
        trash: Default::default(),
        rebuild_observer: Default::default(),
        run_cache: super::run_cache::RunCache::new(config.run_cache_bytes.unwrap_or(super::DEFAULT_RUN_CACHE_BYTES)),
        upload_streams_used: Default::default(),
        u_open: Arc::new(super::handles::OpenDeals::new(config.open_u_deals.unwrap_or(super::handles::DEFAULT_OPEN_U_DEALS))),
        config,
    };
    // One deal's damage never stops the store: a record that does not decode, or a
    // deal that cannot be brought back at all, is left out (its files and σ̃ kept
    // untouched for the operator); a live deal whose files are damaged is quarantined
    // (`recover_deal`).
    let mut metas = Vec::new();
    let mut left_out = BTreeSet::new();
    for kv in store.db.scan_prefix([meta::DEAL_PREFIX]) {
        let (k, v) = kv?;
        match DealMeta::decode(&v) {
            Ok(m) => metas.push(m),
            Err(e) => {
                let id = deal_of_key(&k);
                tracing::error!(deal = ?id, "deal left out: its record in the metadata database does not decode ({e}); its files are kept");
                left_out.extend(id);
            }
        }
    }
    let mut map = BTreeMap::new();
    for m in metas {
        let id = m.params.deal;
        let st = match store.recover_deal(m) {
            Ok(st) => st,
            Err(e) => {
                tracing::error!(deal = id, "deal left out: it cannot be opened ({e}); its files are kept");
                left_out.insert(id);
                continue;
            }
        };
        store.gc(&st.meta, &st.dir, true);
        map.insert(id, Arc::new(Deal { op: Default::default(), state: RwLock::new(Some(st)), builds: Default::default(), ..Default::default() }));
    }
    let known = |id: u64| map.contains_key(&id) || left_out.contains(&id);
    // Deal folders without a record (a crash while a new deal's upload began).
    if let Ok(entries) = std::fs::read_dir(&deals_dir) {
        for e in entries.flatten() {
            let known = e.file_name().to_str().and_then(|s| s.parse::<u64>().ok()).is_some_and(known);
            if !known {
                if let Err(err) = std::fs::remove_dir_all(e.path()) {
                    tracing::warn!(dir = %e.path().display(), "removing an orphan deal folder: {err}");
                }
            }
        }
    }
    // σ̃ entries of deals without a record, and snapshot blocks of deals without a
    // pending C build.
    for kv in store.db.scan_prefix([meta::SEALED_PREFIX]) {
        let (k, _) = kv?;
        if deal_of_key(&k).is_none_or(|d| !known(d)) {
            store.db.remove(k)?;
        }
    }
    for kv in store.db.scan_prefix([meta::SNAPSHOT_PREFIX]) {
        let (k, _) = kv?;
        let deal = deal_of_key(&k);
        let c_pending = deal.is_some_and(|d| left_out.contains(&d))
            || deal.and_then(|d| map.get(&d)).is_some_and(|d| {
                super::rlock(&d.state).as_ref().is_some_and(|st| st.meta.c_building())
            });
        if !c_pending {
            store.db.remove(k)?;
        }
    }
    *super::wlock(&store.deals) = map;
    store.db.flush()?;
    Ok(store)
}

/// The deal id of a sled key `prefix ‖ u64be(deal) ‖ …`.
fn deal_of_key(k: &[u8]) -> Option<u64> {
    k.get(1..9).and_then(|b| <[u8; 8]>::try_from(b).ok()).map(u64::from_be_bytes)
}

impl Store {
    /// Reads which indices the pending C build's snapshot file holds into
    /// `st.snapshot_saved` (`snapshot.rs`), first moving into that file the snapshot
    /// blocks that a node with records before version 6 kept in sled (one entry per
    /// block under [`meta::snapshot_key`]), in one commit that counts them and removes
    /// the entries.
    ///
    /// Errors: [`StoreError::Corrupt`] for a bad entry or record, [`StoreError::Io`],
    /// [`StoreError::Sled`].
    fn load_snapshot(&self, st: &mut DealState) -> Result<()> {
        let deal = st.meta.params.deal;
        let (n, beta) = (st.meta.num_blocks(), st.meta.params.block_bytes as u64);
        let mut legacy = Vec::new();
        for kv in self.db.scan_prefix(meta::snapshot_deal_prefix(deal)) {
            let (key, value) = kv?;
            let index = key.get(9..17).and_then(|b| <[u8; 8]>::try_from(b).ok()).map(u64::from_be_bytes);
            match index {
                Some(i) if i < n && value.len() as u64 == beta => legacy.push((i, value, key)),
                _ => return Err(StoreError::Corrupt(format!("deal {deal}: bad snapshot entry"))),
            }
        }
        if !legacy.is_empty() {
            let base = st.meta.snapshot_records;
            snapshot::append(&st.dir, beta, base, legacy.iter().map(|(i, b, _)| (*i, b.as_ref())))?;
            runs::sync_dir(&st.dir)?;
            let mut new = st.meta.clone();
            new.snapshot_records = base.saturating_add(legacy.len() as u64);
            let mut batch = sled::Batch::default();
            for (_, _, key) in legacy {
                batch.remove(key);
            }
            self.commit(&new, Some(&st.meta), batch)?;
            st.meta = new;
        }
        st.snapshot_saved = snapshot::read(&st.dir, n, beta, st.meta.snapshot_records, false)?.into_iter().map(|(i, _)| i).collect();
        Ok(())
    }

    /// Brings one deal back: its U files, the pending update, the U tree. A live deal
    /// whose files are damaged is quarantined ([`DealState::damaged`], logged as an
    /// error) instead of failing: U missing, short or unreadable, its pending update
    /// not applicable or its tree not matching the committed root U (U is then not
    /// served), or a current run's blocks or tree file missing or short.
    ///
    /// Errors (the deal is then left out): the deal folder cannot be created, or an
    /// uploading deal's U files cannot be created.
    fn recover_deal(&self, mut m: DealMeta) -> Result<DealState> {
        let id = m.params.deal;
        let dir = self.deal_dir(id);
        std::fs::create_dir_all(&dir).map_err(|e| StoreError::io("create", &dir, 0, e))?;
        let format = BlockFormat::new(m.params.block_bytes as usize)?;
        let (n, beta) = (m.num_blocks(), m.params.block_bytes as u64);
        let mut damage = Vec::new();
        let u = match m.phase {
            Phase::Uploading { received } => match UFiles::open(&dir, n, beta, &self.u_open) {
                Ok(u) => Some(u),
                Err(_) => {
                    // Files missing or of other sizes (a restart with new parameters
                    // that crashed before committing): start the upload over.
                    let u = UFiles::create(&dir, n, beta, &self.u_open)?;
                    if received != 0 {
                        m.phase = Phase::Uploading { received: 0 };
                        self.db.insert(meta::deal_key(id), m.encode())?;
                    }
                    Some(u)
                }
            },
            Phase::Live => match UFiles::open(&dir, n, beta, &self.u_open) {
                Ok(u) => Some(u),
                Err(e) => {
                    damage.push(format!("U files unusable: {e}"));
                    None
                }
            },
        };
        let mut st = DealState { meta: m, format, dir, u, u_tree: None, damaged: None, pending_roots: None, snapshot_saved: Default::default() };
        if st.meta.phase == Phase::Live {
            if st.u.is_some() {
                let tree = self.finish_pending(&mut st, None).and_then(|()| st.u()?.tree(n));
                match tree {
                    Ok(tree) if tree.root() == st.meta.root_u => st.u_tree = Some(tree),
                    Ok(tree) => damage.push(format!("U files give root U {}, the committed one is {}", tree.root(), st.meta.root_u)),
                    Err(e) => damage.push(format!("U files unreadable: {e}")),
                }
                if st.u_tree.is_none() {
                    st.u = None;
                }
            }
            if st.meta.c_building() {
                if let Err(e) = self.load_snapshot(&mut st) {
                    damage.push(format!("the pending C build's snapshot blocks are unusable: {e}"));
                }
            }
            damage.extend(damaged_runs(&st));
        }
        if !damage.is_empty() {
            let reason = damage.join("; ");
            tracing::error!(
                deal = id,
                %reason,
                "deal QUARANTINED: its files are damaged; serving what is intact (coded runs for extraction and epoch proofs), refusing owner writes{}",
                if st.u.is_none() { " and U reads" } else { "" }
            );
            st.damaged = Some(reason);
        }
        Ok(st)
    }
}

/// The damage of a live deal's current runs (deferred builds not yet built aside):
/// a blocks or tree file missing or shorter than the run.
fn damaged_runs(st: &DealState) -> Vec<String> {
    let cb = st.format.coded_block_bytes() as u64;
    let mut out = Vec::new();
    for (run, size, _) in st.meta.current_runs() {
        if st.meta.is_building(run) {
            continue;
        }
        let files = [
            ("blocks", super::runs::blocks_path(&st.dir, run), size.saturating_mul(cb)),
            ("tree", super::runs::tree_path(&st.dir, run), super::runs::tree_bytes(size)),
        ];
        for (what, path, want) in files {
            match std::fs::metadata(&path) {
                Ok(md) if md.len() >= want => {}
                Ok(md) => out.push(format!("run {run}: {what} file has {} of {want} bytes", md.len())),
                Err(e) => out.push(format!("run {run}: {what} file {}: {e}", path.display())),
            }
        }
    }
    out
}
