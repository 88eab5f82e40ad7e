//! Opening a store: load every deal record, re-apply pending U updates, rebuild the
//! U trees, and delete what no record references (run files, `.tmp` files, σ̃
//! entries, deal folders).

use super::error::{Result, StoreError};
use super::meta::{self, DealMeta, Phase};
use super::u::UFiles;
use super::{Deal, DealState, Store, StoreConfig};
use dpor_core::block::BlockFormat;
use std::collections::BTreeMap;
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
        config,
        db,
        deals: RwLock::new(BTreeMap::new()),
        commit_fault: Default::default(),
        build_signal: Default::default(),
        builders: Default::default(),
        trash: Default::default(),
    };
    let mut metas = Vec::new();
    for kv in store.db.scan_prefix([meta::DEAL_PREFIX]) {
        let (_, v) = kv?;
        metas.push(DealMeta::decode(&v)?);
    }
    let mut map = BTreeMap::new();
    for m in metas {
        let id = m.params.deal;
        let st = store.recover_deal(m)?;
        store.gc(&st.meta, &st.dir, true);
        map.insert(id, Arc::new(Deal { op: Default::default(), state: RwLock::new(Some(st)), builds: Default::default() }));
    }
    // Deal folders without a record (a crash while a new deal's upload began).
    if let Ok(entries) = std::fs::read_dir(&deals_dir) {
        for e in entries.flatten() {
            let known = e.file_name().to_str().and_then(|s| s.parse::<u64>().ok()).is_some_and(|id| map.contains_key(&id));
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
        let deal = k.get(1..9).and_then(|b| <[u8; 8]>::try_from(b).ok()).map(u64::from_be_bytes);
        if deal.is_none_or(|d| !map.contains_key(&d)) {
            store.db.remove(k)?;
        }
    }
    for kv in store.db.scan_prefix([meta::SNAPSHOT_PREFIX]) {
        let (k, _) = kv?;
        let deal = k.get(1..9).and_then(|b| <[u8; 8]>::try_from(b).ok()).map(u64::from_be_bytes);
        let c_pending = deal.and_then(|d| map.get(&d)).is_some_and(|d| {
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

impl Store {
    /// Brings one deal back: its U files, the pending update, the U tree.
    fn recover_deal(&self, mut m: DealMeta) -> Result<DealState> {
        let id = m.params.deal;
        let dir = self.deal_dir(id);
        std::fs::create_dir_all(&dir).map_err(|e| StoreError::io("create", &dir, 0, e))?;
        let format = BlockFormat::new(m.params.block_bytes as usize)?;
        let (n, beta) = (m.num_blocks(), m.params.block_bytes as u64);
        let u = match m.phase {
            Phase::Uploading { received } => match UFiles::open(&dir, n, beta) {
                Ok(u) => u,
                Err(_) => {
                    // Files missing or of other sizes (a restart with new parameters
                    // that crashed before committing): start the upload over.
                    let u = UFiles::create(&dir, n, beta)?;
                    if received != 0 {
                        m.phase = Phase::Uploading { received: 0 };
                        self.db.insert(meta::deal_key(id), m.encode())?;
                    }
                    u
                }
            },
            Phase::Live => UFiles::open(&dir, n, beta)?,
        };
        let mut st = DealState { meta: m, format, dir, u, u_tree: None };
        if st.meta.phase == Phase::Live {
            self.finish_pending(&mut st, None)?;
            let tree = st.u.tree(n)?;
            if tree.root() != st.meta.root_u {
                tracing::warn!(deal = id, "U files do not match the committed root U (damaged on disk?)");
            }
            st.u_tree = Some(tree);
            for (run, _, _) in st.meta.current_runs() {
                if !st.meta.is_building(run) && !super::runs::blocks_path(&st.dir, run).exists() {
                    tracing::warn!(deal = id, %run, "a live run's file is missing");
                }
            }
        }
        Ok(st)
    }
}
