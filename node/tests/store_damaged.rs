//! A store whose run files are damaged serves what it still has, position by
//! position; the testing-only commit fault commits wrong coded blocks inside the run
//! root; and a store reopened with one deal's files damaged (U deleted or truncated,
//! a run file deleted, a record that does not decode) opens, serves every other deal
//! in full and quarantines the damaged one, which still serves what is intact.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloy_primitives::{Address, B256};
use dpor_core::block::BlockFormat;
use dpor_core::merkle;
use dpor_core::state::{RunId, ServerState};
use dpor_node::store::{CommitFault, DealParams, Store, StoreConfig, StoreError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

const DEAL: u64 = 3;
const N: u64 = 16;
const BETA: usize = 40;

/// A store with one live deal of N random blocks: (store, reference, C's id).
fn uploaded(dir: &std::path::Path, fault: Option<CommitFault>) -> (Store, ServerState, RunId) {
    let store = Store::open(dir, StoreConfig::default()).unwrap();
    store.set_commit_fault(fault);
    let (reference, c) = upload(&store, DEAL, 8);
    (store, reference, c)
}

/// Uploads deal `deal` (N random blocks from `seed`) into `store`, nonces 1..=3:
/// (reference, C's id).
fn upload(store: &Store, deal: u64, seed: u64) -> (ServerState, RunId) {
    let mut rng = StdRng::seed_from_u64(seed);
    let blocks: Vec<Vec<u8>> = (0..N).map(|_| (0..BETA).map(|_| rng.gen()).collect()).collect();
    let sealed: Vec<[u8; 32]> = (0..N).map(|_| rng.gen()).collect();
    store.upload_begin(DealParams { deal, owner: Address::repeat_byte(1), num_blocks: N, block_bytes: BETA as u32 }, 1).unwrap();
    store.upload_blocks(deal, 2, 0, blocks.clone(), &sealed).unwrap();
    let (_, c, _) = store.upload_finish(deal, 3).unwrap();
    (ServerState::new(BlockFormat::new(BETA).unwrap(), blocks).unwrap(), c)
}

fn reference_bytes(reference: &ServerState) -> Vec<Vec<u8>> {
    let f = reference.format();
    reference.c().blocks.chunks(f.width()).map(|b| f.coded_to_bytes(b).unwrap()).collect()
}

#[test]
fn a_truncated_run_file_is_served_up_to_where_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let (store, reference, c) = uploaded(dir.path(), None);
    let bytes = reference_bytes(&reference);
    let size = 2 * N;
    let cb = BlockFormat::new(BETA).unwrap().coded_block_bytes() as u64;
    let tree = merkle::run_tree(&bytes).unwrap();
    let file = store.run_file(DEAL, c).unwrap();
    // The last S/2 − 1 blocks gone, and half a block more.
    let keep = size / 2 + 1;
    std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(keep * cb - cb / 2).unwrap();
    let all: Vec<u64> = (0..size).collect();
    let served = store.served(DEAL, c, &all).unwrap();
    for (p, (block, path)) in served.iter().enumerate() {
        if (p as u64) < keep - 1 {
            assert_eq!(block, &bytes[p], "block {p} served intact");
        } else {
            assert!(block.is_empty(), "block {p} is past the end: empty");
        }
        assert_eq!(path, &tree.path(p as u64).unwrap(), "path {p} from the intact tree");
    }
    // The range read across the end is answered too (the old store refused it whole).
    let range = store.coded_range(DEAL, c, size / 2 - 2, 8).unwrap();
    assert_eq!(range.len(), 8);
    assert_eq!(range[0], bytes[(size / 2 - 2) as usize]);
    assert!(range[7].is_empty());
    // Bad requests are still refused as a whole.
    assert!(matches!(store.served(DEAL, c, &[size]), Err(StoreError::Range(_))));
    let other = RunId { tag: dpor_core::RunTag::level(3), built_at: 1 };
    assert!(matches!(store.served(DEAL, other, &[0]), Err(StoreError::UnknownRun { .. })));
}

#[test]
fn a_damaged_or_missing_tree_does_not_stop_the_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let (store, reference, c) = uploaded(dir.path(), None);
    let bytes = reference_bytes(&reference);
    let tree_file = store.run_file(DEAL, c).unwrap().with_extension("tree");
    let size = 2 * N;
    // The tree cut after its leaves and first inner layer: paths of length 2.
    let full = std::fs::read(&tree_file).unwrap();
    std::fs::write(&tree_file, &full[..(size + size / 2) as usize * 32]).unwrap();
    let served = store.served(DEAL, c, &[0, 5, size - 1]).unwrap();
    for ((block, path), p) in served.iter().zip([0usize, 5, size as usize - 1]) {
        assert_eq!(block, &bytes[p]);
        assert_eq!(path.len(), 2, "the part of the path the tree still holds");
    }
    std::fs::remove_file(&tree_file).unwrap();
    let served = store.served(DEAL, c, &[0, 5]).unwrap();
    assert_eq!(served[1], (bytes[5].clone(), Vec::<B256>::new()));
}

#[test]
fn a_commit_fault_commits_wrong_blocks_inside_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let fault = CommitFault(Arc::new(|_run, _size| vec![3, 17, 99]));
    let (store, reference, c) = uploaded(dir.path(), Some(fault));
    let honest = reference_bytes(&reference);
    let all: Vec<u64> = (0..2 * N).collect();
    let served = store.served(DEAL, c, &all).unwrap();
    let stored: Vec<Vec<u8>> = served.iter().map(|(b, _)| b.clone()).collect();
    let differ: Vec<usize> = (0..stored.len()).filter(|&p| stored[p] != honest[p]).collect();
    assert_eq!(differ, vec![3, 17], "exactly the faulted positions (99 is past the run) are wrong");
    let root = store.view(DEAL).unwrap().c.1;
    assert_eq!(root, merkle::run_tree(&stored).unwrap().root(), "the committed root is over the wrong blocks");
    assert_ne!(root, merkle::run_tree(&honest).unwrap().root());
}

fn deal_dir(dir: &std::path::Path, deal: u64) -> std::path::PathBuf {
    dir.join("deals").join(deal.to_string())
}

/// Every coded block of `run` (C or a level of `size` blocks) the store serves,
/// checked block by block and path by path against the reference's run.
fn assert_run_served(store: &Store, deal: u64, run: RunId, want: &[Vec<u8>]) {
    let tree = merkle::run_tree(want).unwrap();
    let all: Vec<u64> = (0..want.len() as u64).collect();
    let served = store.served(deal, run, &all).unwrap();
    for (p, (block, path)) in served.iter().enumerate() {
        assert_eq!(block, &want[p], "deal {deal} run {run}: block {p}");
        assert_eq!(path, &tree.path(p as u64).unwrap(), "deal {deal} run {run}: path {p}");
    }
    // The epoch proofs' read (whole blocks with full paths) works too.
    let coded = store.coded(deal, run, &[0, want.len() as u64 - 1]).unwrap();
    assert_eq!(coded[1].0, want[want.len() - 1]);
}

/// Three live deals; then deal 3's `u.blocks` is deleted, deal 4's truncated by one
/// byte, deal 5 left alone, and the store reopened: it opens, deal 5 serves and takes
/// writes as before, deals 3 and 4 are quarantined (the reason in their view), serve
/// their coded runs whole, and refuse U reads and writes with `Damaged`, changing
/// nothing. Restoring the file and reopening lifts the quarantine.
#[test]
fn a_deal_with_a_deleted_or_truncated_u_file_is_quarantined_and_the_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreConfig::default()).unwrap();
    let mut refs = Vec::new();
    for deal in [3u64, 4, 5] {
        refs.push(upload(&store, deal, deal));
    }
    // A write on deal 4 so that it has a level besides C.
    let format = BlockFormat::new(BETA).unwrap();
    let block = vec![9u8; BETA];
    let out = store.write(4, 4, 2, block.clone(), [7u8; 32]).unwrap();
    refs[1].0.write(2, block).unwrap();
    drop(store);
    let saved_u = std::fs::read(deal_dir(dir.path(), 3).join("u.blocks")).unwrap();
    std::fs::remove_file(deal_dir(dir.path(), 3).join("u.blocks")).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(deal_dir(dir.path(), 4).join("u.blocks")).unwrap();
    f.set_len(N * BETA as u64 - 1).unwrap();
    drop(f);

    let store = Store::open(dir.path(), StoreConfig::default()).expect("one damaged deal must not stop the store");
    assert_eq!(store.deals(), vec![3, 4, 5]);
    // Deal 5: healthy, reads and writes as before.
    let healthy = store.view(5).unwrap();
    assert_eq!(healthy.damaged, None);
    let (b, _, _) = store.read(5, 7).unwrap();
    assert_eq!(b, refs[2].0.u()[7]);
    assert_eq!(store.u_blocks(5, 0, N).unwrap(), refs[2].0.u().to_vec());
    store.write(5, 4, 1, vec![1u8; BETA], [1u8; 32]).unwrap();
    assert_eq!(store.view(5).unwrap().write_count, 1);
    // Deals 3 and 4: quarantined, the reason names the file.
    for (deal, reference, what) in [(3u64, &refs[0].0, "u.blocks"), (4, &refs[1].0, "expected")] {
        let v = store.view(deal).unwrap();
        let reason = v.damaged.clone().unwrap_or_else(|| panic!("deal {deal} is not reported damaged"));
        assert!(reason.contains("U files unusable") && reason.contains(what), "deal {deal}: {reason}");
        // What is intact is served: every coded block of C (and of deal 4's level),
        // with its path, for extraction, audits and epoch proofs.
        let c: Vec<Vec<u8>> = reference.c().blocks.chunks(format.width()).map(|b| format.coded_to_bytes(b).unwrap()).collect();
        assert_run_served(&store, deal, v.c.0, &c);
        for (l, run, _) in &v.levels {
            let lv: Vec<Vec<u8>> =
                reference.level(*l).unwrap().unwrap().blocks.chunks(format.width()).map(|b| format.coded_to_bytes(b).unwrap()).collect();
            assert_run_served(&store, deal, *run, &lv);
        }
        // U reads and owner writes: Damaged, nothing changed.
        for e in [
            store.read(deal, 0).map(|_| ()),
            store.u_blocks(deal, 0, 1).map(|_| ()),
            store.u_leaves(deal, 0, 1).map(|_| ()),
            store.u_paths(deal, &[0]).map(|_| ()),
            store.write(deal, 10, 0, vec![0u8; BETA], [0u8; 32]).map(|_| ()),
            store.write_batch(deal, 11, vec![(0, vec![0u8; BETA], [0u8; 32])]).map(|_| ()),
            store.resize(deal, 12, 2 * N).map(|_| ()),
        ] {
            match e {
                Err(StoreError::Damaged { deal: d, reason: r }) => assert_eq!((d, &r), (deal, &reason)),
                other => panic!("deal {deal}: expected Damaged, got {other:?}"),
            }
        }
        assert_eq!(store.view(deal).unwrap(), v, "deal {deal}: a refused request changed nothing");
    }
    assert_eq!(store.view(4).unwrap().levels.len(), 1, "deal 4 kept its level");
    assert_eq!(store.view(4).unwrap().levels[0].1, out.run);
    // The U files of the damaged deals are left as they are (nothing deleted).
    assert!(deal_dir(dir.path(), 4).join("u.blocks").exists());
    assert!(deal_dir(dir.path(), 3).join("u.sealed").exists());

    // The file restored: the quarantine is lifted on the next open.
    drop(store);
    std::fs::write(deal_dir(dir.path(), 3).join("u.blocks"), &saved_u).unwrap();
    let store = Store::open(dir.path(), StoreConfig::default()).unwrap();
    assert_eq!(store.view(3).unwrap().damaged, None);
    assert_eq!(store.u_blocks(3, 0, N).unwrap(), refs[0].0.u().to_vec());
    store.write(3, 4, 0, vec![3u8; BETA], [3u8; 32]).unwrap();
    assert!(store.view(4).unwrap().damaged.is_some(), "deal 4 is still damaged");
}

/// A current run's file deleted: the deal is quarantined (U still served: it is
/// intact), the run's other file and the other runs are served, writes are refused.
#[test]
fn a_deal_with_a_deleted_run_file_is_quarantined_but_serves_u() {
    let dir = tempfile::tempdir().unwrap();
    let (store, reference, c) = uploaded(dir.path(), None);
    let tree_file = store.run_file(DEAL, c).unwrap().with_extension("tree");
    drop(store);
    std::fs::remove_file(&tree_file).unwrap();
    let store = Store::open(dir.path(), StoreConfig::default()).unwrap();
    let reason = store.view(DEAL).unwrap().damaged.expect("quarantined");
    assert!(reason.contains("tree file"), "{reason}");
    assert_eq!(store.u_blocks(DEAL, 0, N).unwrap(), reference.u().to_vec(), "U is intact and served");
    let served = store.served(DEAL, c, &[0, 1]).unwrap();
    assert_eq!(served[1].0, reference_bytes(&reference)[1], "the blocks file is served");
    assert!(matches!(store.write(DEAL, 4, 0, vec![0u8; BETA], [0u8; 32]), Err(StoreError::Damaged { .. })));
}

/// A deal record that does not decode: the store opens with the other deals, and the
/// left-out deal's folder is kept for the operator (not collected as an orphan).
#[test]
fn an_undecodable_deal_record_leaves_that_deal_out_and_keeps_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let (store, reference, _) = uploaded(dir.path(), None);
    upload(&store, 9, 9);
    drop(store);
    let db = dpor_node::store::open_metadata_db(dir.path()).unwrap();
    let mut key = vec![b'd'];
    key.extend_from_slice(&9u64.to_be_bytes());
    db.insert(key, &b"\xffnot a record"[..]).unwrap();
    db.flush().unwrap();
    drop(db);
    let store = Store::open(dir.path(), StoreConfig::default()).expect("one bad record must not stop the store");
    assert_eq!(store.deals(), vec![DEAL]);
    assert_eq!(store.u_blocks(DEAL, 0, N).unwrap(), reference.u().to_vec());
    assert!(deal_dir(dir.path(), 9).join("u.blocks").exists(), "the left-out deal's files are kept");
}
