//! A store whose run files are damaged serves what it still has, position by
//! position (issue 10, finding 2); and the testing-only commit fault commits wrong
//! coded blocks inside the run root (finding 1).

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
    let mut rng = StdRng::seed_from_u64(8);
    let blocks: Vec<Vec<u8>> = (0..N).map(|_| (0..BETA).map(|_| rng.gen()).collect()).collect();
    let sealed: Vec<[u8; 32]> = (0..N).map(|_| rng.gen()).collect();
    store.upload_begin(DealParams { deal: DEAL, owner: Address::repeat_byte(1), num_blocks: N, block_bytes: BETA as u32 }, 1).unwrap();
    store.upload_blocks(DEAL, 2, 0, &blocks, &sealed).unwrap();
    let (_, c, _) = store.upload_finish(DEAL, 3).unwrap();
    (store, ServerState::new(BlockFormat::new(BETA).unwrap(), blocks).unwrap(), c)
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
