//! Bad input: each is a typed error that changes nothing (the view and the files are
//! as before), and the store keeps working afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloy_primitives::{Address, B256, U256};
use dpor_core::digest::Digest;
use dpor_core::state::RunId;
use dpor_core::RunTag;
use dpor_node::store::{DealParams, DealView, Store, StoreConfig, StoreError};
use std::path::Path;

const DEAL: u64 = 3;
const N: u64 = 8;
const BETA: usize = 16;

fn params() -> DealParams {
    DealParams { deal: DEAL, owner: Address::repeat_byte(2), num_blocks: N, block_bytes: BETA as u32 }
}

fn digest_of(v: &DealView, version: u64) -> Digest {
    Digest {
        dealId: U256::from(v.params.deal),
        version,
        numBlocks: v.params.num_blocks,
        writeCount: v.write_count,
        rebuildCount: v.rebuild_count,
        rootU: v.root_u,
        rootC: v.c.1,
        levelRoots: v.levels.iter().map(|l| l.2).collect(),
    }
}

/// Names and lengths of every file of the deal.
fn files(dir: &Path) -> Vec<(String, u64)> {
    let mut out: Vec<_> = std::fs::read_dir(dir.join("deals").join(DEAL.to_string()))
        .map(|rd| rd.map(|e| e.unwrap()).map(|e| (e.file_name().into_string().unwrap(), e.metadata().unwrap().len())).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// Runs `op`, asserts its error matches, and that nothing observable changed.
fn rejected(store: &Store, dir: &Path, op: impl FnOnce(&Store) -> Result<(), StoreError>, want: fn(&StoreError) -> bool) {
    let before = (store.view(DEAL).ok(), files(dir), store.deals());
    let err = op(store).expect_err("bad input accepted");
    assert!(want(&err), "unexpected error {err:?}");
    assert_eq!((store.view(DEAL).ok(), files(dir), store.deals()), before, "a rejected op changed the state ({err})");
}

fn blocks(k: u64, fill: u8) -> Vec<Vec<u8>> {
    (0..k).map(|i| vec![fill.wrapping_add(i as u8); BETA]).collect()
}

#[test]
fn bad_input_is_a_typed_error_that_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // An upload request past the blocks received waits this long for the one before
    // it (60 s by default) before it is refused.
    let config = StoreConfig { upload_turn_wait: Some(std::time::Duration::from_millis(50)), ..Default::default() };
    let store = Store::open(dir, config).unwrap();
    use StoreError as E;
    // Unknown deal, everywhere.
    rejected(&store, dir, |s| s.view(9).map(|_| ()), |e| matches!(e, E::UnknownDeal(9)));
    rejected(&store, dir, |s| s.write(9, 1, 0, vec![0; BETA], [0; 32]).map(|_| ()), |e| matches!(e, E::UnknownDeal(9)));
    rejected(&store, dir, |s| s.upload_blocks(9, 1, 0, blocks(1, 0), &[[0; 32]]), |e| matches!(e, E::UnknownDeal(9)));
    rejected(&store, dir, |s| s.read(9, 0).map(|_| ()), |e| matches!(e, E::UnknownDeal(9)));
    rejected(&store, dir, |s| s.check_cosign(9, &Digest { dealId: U256::from(9), version: 1, numBlocks: 1, writeCount: 0, rebuildCount: 0, rootU: B256::ZERO, rootC: B256::ZERO, levelRoots: vec![] }), |e| matches!(e, E::UnknownDeal(9)));
    // Bad parameters.
    rejected(&store, dir, |s| s.upload_begin(DealParams { num_blocks: 6, ..params() }, 1), |e| matches!(e, E::Params(_)));
    rejected(&store, dir, |s| s.upload_begin(DealParams { block_bytes: 0, ..params() }, 1), |e| matches!(e, E::Params(_)));
    // Upload: begin, then bad batches.
    store.upload_begin(params(), 10).unwrap();
    let s32 = |k: usize| vec![[5u8; 32]; k];
    rejected(&store, dir, |s| s.upload_blocks(DEAL, 10, 0, blocks(2, 0), &s32(2)), |e| matches!(e, E::Replay { nonce: 10, last: 10 }));
    rejected(&store, dir, |s| s.upload_blocks(DEAL, 11, 1, blocks(2, 0), &s32(2)), |e| matches!(e, E::Range(_)));
    rejected(&store, dir, |s| s.upload_blocks(DEAL, 11, 0, vec![vec![0; BETA + 1]], &s32(1)), |e| matches!(e, E::BlockSize { got: 17, expected: 16 }));
    rejected(&store, dir, |s| s.upload_blocks(DEAL, 11, 0, blocks(2, 0), &s32(1)), |e| matches!(e, E::Range(_)));
    rejected(&store, dir, |s| s.upload_blocks(DEAL, 11, 0, blocks(9, 0), &s32(9)), |e| matches!(e, E::Range(_)));
    store.upload_blocks(DEAL, 11, 0, blocks(4, 0), &s32(4)).unwrap();
    rejected(&store, dir, |s| s.upload_blocks(DEAL, 12, 2, blocks(2, 0), &s32(2)), |e| matches!(e, E::Range(_)));
    rejected(&store, dir, |s| s.upload_finish(DEAL, 12).map(|_| ()), |e| matches!(e, E::Phase(_)));
    rejected(&store, dir, |s| s.write(DEAL, 12, 0, vec![0; BETA], [0; 32]).map(|_| ()), |e| matches!(e, E::Phase(_)));
    rejected(&store, dir, |s| s.read(DEAL, 0).map(|_| ()), |e| matches!(e, E::Phase(_)));
    rejected(&store, dir, |s| s.upload_begin(DealParams { owner: Address::repeat_byte(9), ..params() }, 12), |e| matches!(e, E::Owner { .. }));
    store.upload_blocks(DEAL, 12, 4, blocks(4, 4), &s32(4)).unwrap();
    let (_, c, _) = store.upload_finish(DEAL, 13).unwrap();
    rejected(&store, dir, |s| s.upload_begin(params(), 14), |e| matches!(e, E::Phase(_)));
    rejected(&store, dir, |s| s.upload_finish(DEAL, 14).map(|_| ()), |e| matches!(e, E::Phase(_)));
    // Writes.
    rejected(&store, dir, |s| s.write(DEAL, 13, 0, vec![0; BETA], [0; 32]).map(|_| ()), |e| matches!(e, E::Replay { nonce: 13, last: 13 }));
    rejected(&store, dir, |s| s.write(DEAL, 2, 0, vec![0; BETA], [0; 32]).map(|_| ()), |e| matches!(e, E::Replay { .. }));
    rejected(&store, dir, |s| s.write(DEAL, 14, N, vec![0; BETA], [0; 32]).map(|_| ()), |e| matches!(e, E::Index { index: 8, num_blocks: 8 }));
    rejected(&store, dir, |s| s.write(DEAL, 14, 0, vec![0; BETA - 1], [0; 32]).map(|_| ()), |e| matches!(e, E::BlockSize { .. }));
    rejected(&store, dir, |s| s.write(DEAL, 14, 0, vec![], [0; 32]).map(|_| ()), |e| matches!(e, E::BlockSize { .. }));
    store.write(DEAL, 14, 1, vec![1; BETA], [1; 32]).unwrap();
    // Reads out of range.
    rejected(&store, dir, |s| s.read(DEAL, N).map(|_| ()), |e| matches!(e, E::Index { .. }));
    rejected(&store, dir, |s| s.u_blocks(DEAL, 7, 2).map(|_| ()), |e| matches!(e, E::Range(_)));
    rejected(&store, dir, |s| s.u_blocks(DEAL, u64::MAX, 2).map(|_| ()), |e| matches!(e, E::Range(_)));
    rejected(&store, dir, |s| s.coded(DEAL, c, &[0, 16]).map(|_| ()), |e| matches!(e, E::Range(_)));
    rejected(&store, dir, |s| s.coded_range(DEAL, c, 15, 2).map(|_| ()), |e| matches!(e, E::Range(_)));
    let ghost = RunId { tag: RunTag::level(2), built_at: 77 };
    rejected(&store, dir, |s| s.coded(DEAL, ghost, &[0]).map(|_| ()), |e| matches!(e, E::UnknownRun { .. }));
    rejected(&store, dir, |s| s.store_sealed(DEAL, 15, ghost, 0, &[[0; 32]]), |e| matches!(e, E::UnknownRun { .. }));
    // Digests: mismatches and rollback.
    let v = store.view(DEAL).unwrap();
    let good = digest_of(&v, 5);
    for bad in [
        Digest { rootU: B256::repeat_byte(1), ..good.clone() },
        Digest { rootC: B256::repeat_byte(1), ..good.clone() },
        Digest { writeCount: 0, levelRoots: vec![], ..good.clone() },
        Digest { rebuildCount: 1, ..good.clone() },
        Digest { dealId: U256::from(4), ..good.clone() },
        Digest { levelRoots: vec![B256::ZERO], ..good.clone() },
        Digest { levelRoots: vec![], ..good.clone() },
    ] {
        rejected(&store, dir, |s| s.check_cosign(DEAL, &bad), |e| matches!(e, E::DigestMismatch(_)));
    }
    store.check_cosign(DEAL, &good).unwrap();
    rejected(&store, dir, |s| s.check_cosign(DEAL, &good), |e| matches!(e, E::StaleVersion { got: 5, last: 5 }));
    rejected(&store, dir, |s| s.check_cosign(DEAL, &digest_of(&v, 4)), |e| matches!(e, E::StaleVersion { got: 4, last: 5 }));
    rejected(&store, dir, |s| s.set_posted(DEAL, &Digest { dealId: U256::from(4), ..good.clone() }), |e| matches!(e, E::DigestMismatch(_)));
    // Still works.
    store.write(DEAL, 20, 2, vec![2; BETA], [2; 32]).unwrap();
    store.check_cosign(DEAL, &digest_of(&store.view(DEAL).unwrap(), 6)).unwrap();
    assert_eq!(store.view(DEAL).unwrap().total_writes(), 2);
}

trait Total {
    fn total_writes(&self) -> u64;
}
impl Total for DealView {
    fn total_writes(&self) -> u64 {
        self.rebuild_count * self.params.num_blocks + self.write_count
    }
}

#[test]
fn quota_refuses_without_corrupting() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // A store too small for the upload at all.
    {
        let store = Store::open(dir, StoreConfig { quota_bytes: Some(1000), ..Default::default() }).unwrap();
        rejected(&store, dir, |s| s.upload_begin(params(), 1), |e| matches!(e, StoreError::DiskFull { .. }));
        assert!(store.deals().is_empty());
    }
    let store = Store::open(dir, StoreConfig::default()).unwrap();
    store.upload_begin(params(), 1).unwrap();
    store.upload_blocks(DEAL, 2, 0, blocks(N, 0), &vec![[0; 32]; N as usize]).unwrap();
    store.upload_finish(DEAL, 3).unwrap();
    store.write(DEAL, 4, 0, vec![9; BETA], [9; 32]).unwrap();
    drop(store);
    // Exactly the current usage plus less than a level-1 run: the write is refused.
    let usage = Store::open(dir, StoreConfig::default()).unwrap().disk_usage().unwrap();
    let store = Store::open(dir, StoreConfig { quota_bytes: Some(usage + 100), ..Default::default() }).unwrap();
    for nonce in [5, 6] {
        rejected(&store, dir, |s| s.write(DEAL, nonce, 1, vec![1; BETA], [1; 32]).map(|_| ()), |e| {
            matches!(e, StoreError::DiskFull { needed, available } if needed > available)
        });
    }
    let before = store.view(DEAL).unwrap();
    // Reads and digests still work.
    store.read(DEAL, 0).unwrap();
    store.check_cosign(DEAL, &digest_of(&before, 1)).unwrap();
    drop(store);
    // With room again, the same write goes through and later ones too.
    let store = Store::open(dir, StoreConfig { quota_bytes: Some(usage + 1_000_000), ..Default::default() }).unwrap();
    assert_eq!(store.view(DEAL).unwrap().write_count, 1);
    for (i, nonce) in (5..15).enumerate() {
        store.write(DEAL, nonce, i as u64 % N, vec![i as u8; BETA], [3; 32]).unwrap();
    }
    assert_eq!(store.view(DEAL).unwrap().total_writes(), 11);
}

/// The deal's spare run files (`spare-<bytes>-<k>`, kept for the next run of their
/// length) under the store in `dir`: (path, bytes).
fn spare_files(dir: &Path) -> Vec<(std::path::PathBuf, u64)> {
    std::fs::read_dir(dir.join("deals").join(DEAL.to_string()))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("spare-"))
        .map(|e| (e.path(), e.metadata().unwrap().len()))
        .collect()
}

/// Spare run files count in the disk usage, but never make a write fail: at the
/// quota they are deleted before the write is refused.
#[test]
fn spares_give_way_to_a_write_at_the_quota() {
    const SLACK: u64 = 100;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let dir = dir.as_path();
    let store = Store::open(dir, StoreConfig::default()).unwrap();
    store.upload_begin(params(), 1).unwrap();
    store.upload_blocks(DEAL, 2, 0, blocks(N, 0), &vec![[0; 32]; N as usize]).unwrap();
    store.upload_finish(DEAL, 3).unwrap();
    for (i, nonce) in (4..20).enumerate() {
        store.write(DEAL, nonce, i as u64 % N, vec![i as u8; BETA], [4; 32]).unwrap();
    }
    drop(store);
    let spares = spare_files(dir);
    let spare_bytes: u64 = spares.iter().map(|(_, n)| n).sum();
    assert!(spare_bytes > 0, "the writes left spares");
    let usage = Store::open(dir, StoreConfig::default()).unwrap().disk_usage().unwrap();
    // Without the spares, SLACK bytes beside the store are too few for the write.
    let aside = tmp.path().join("aside");
    std::fs::create_dir(&aside).unwrap();
    for (p, _) in &spares {
        std::fs::rename(p, aside.join(p.file_name().unwrap())).unwrap();
    }
    {
        let store = Store::open(dir, StoreConfig { quota_bytes: Some(usage - spare_bytes + SLACK), ..Default::default() }).unwrap();
        let r = store.write(DEAL, 20, 1, vec![7; BETA], [7; 32]);
        assert!(matches!(r, Err(StoreError::DiskFull { .. })), "{r:?}");
    }
    for (p, _) in &spares {
        std::fs::rename(aside.join(p.file_name().unwrap()), p).unwrap();
    }
    // With them, the same quota left over the usage is enough: they are deleted.
    let store = Store::open(dir, StoreConfig { quota_bytes: Some(usage + SLACK), ..Default::default() }).unwrap();
    assert_eq!(spare_files(dir).len(), spares.len(), "opening keeps spares within the bound");
    store.write(DEAL, 20, 1, vec![7; BETA], [7; 32]).unwrap();
    assert_eq!(store.read(DEAL, 1).unwrap().0, vec![7; BETA]);
    assert!(store.disk_usage().unwrap() <= usage + SLACK);
}
