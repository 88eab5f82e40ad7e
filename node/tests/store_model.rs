//! The store against the reference `ServerState`: random uploads and writes (several
//! C-rebuilds), reopening midway, and the GC pins of co-signed and posted digests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloy_primitives::{Address, B256, U256};
use dpor_core::block::BlockFormat;
use dpor_core::digest::Digest;
use dpor_core::merkle;
use dpor_core::state::{RunId, ServerState};
use dpor_node::store::{DealParams, DealView, Phase, Store, StoreConfig, StoreError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::Path;

const DEAL: u64 = 7;

fn open(dir: &Path) -> Store {
    Store::open(dir, StoreConfig::default()).unwrap()
}

fn random_block(rng: &mut StdRng, beta: usize) -> Vec<u8> {
    (0..beta).map(|_| rng.gen()).collect()
}

/// Coded bytes of every block of a reference run.
fn ref_run_bytes(format: &BlockFormat, run: &dpor_core::state::Run) -> Vec<Vec<u8>> {
    run.blocks.chunks(format.width()).map(|b| format.coded_to_bytes(b).unwrap()).collect()
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

/// Every observable of the store equals the reference (U, σ̃, all live runs, roots,
/// paths).
fn check(store: &Store, reference: &ServerState, sealed: &[[u8; 32]], ctx: &str) {
    let format = *reference.format();
    let n = reference.num_blocks();
    let v = store.view(DEAL).unwrap();
    assert_eq!(v.phase, Phase::Live, "{ctx}");
    assert_eq!((v.write_count, v.rebuild_count), (reference.write_count(), reference.rebuild_count()), "{ctx}");
    assert_eq!(store.u_blocks(DEAL, 0, n).unwrap(), reference.u(), "{ctx}: U");
    let u_tree = merkle::u_tree(reference.u(), sealed).unwrap();
    assert_eq!(v.root_u, u_tree.root(), "{ctx}: root U");
    let leaves = store.u_leaves(DEAL, 0, n).unwrap();
    for (i, (root, s)) in leaves.iter().enumerate() {
        assert_eq!((*root, *s), (merkle::block_root(&reference.u()[i]), sealed[i]), "{ctx}: U leaf {i}");
    }
    for i in [0, n / 2, n - 1] {
        let (block, s, path) = store.read(DEAL, i).unwrap();
        assert_eq!(block, reference.u()[i as usize], "{ctx}");
        assert_eq!(s, sealed[i as usize]);
        let leaf = merkle::u_leaf(i, &merkle::block_root(&block), &s);
        merkle::verify_path(&v.root_u, n.trailing_zeros(), i, leaf, &path).unwrap();
    }
    // Runs: C then the filled levels, same ids, same bytes, same roots.
    let mut store_runs = vec![v.c];
    store_runs.extend(v.levels.iter().map(|(_, id, root)| (*id, *root)));
    let ref_runs = reference.runs();
    assert_eq!(store_runs.len(), ref_runs.len(), "{ctx}: run count");
    for ((id, root), r) in store_runs.iter().zip(ref_runs) {
        assert_eq!(*id, r.id(), "{ctx}: run id");
        let bytes = ref_run_bytes(&format, r);
        let size = bytes.len() as u64;
        assert_eq!(*root, merkle::run_tree(&bytes).unwrap().root(), "{ctx}: root of {id}");
        assert_eq!(store.coded_range(DEAL, *id, 0, size).unwrap(), bytes, "{ctx}: blocks of {id}");
        let tree = merkle::run_tree(&bytes).unwrap();
        let leaves: Vec<B256> = (0..size).map(|p| tree.leaf(p).unwrap()).collect();
        assert_eq!(store.run_leaves(DEAL, *id, 0, size).unwrap(), leaves, "{ctx}");
        let positions = [0, size - 1, size / 2];
        for ((block, path), p) in store.coded(DEAL, *id, &positions).unwrap().into_iter().zip(positions) {
            assert_eq!(block, bytes[p as usize]);
            let leaf = merkle::run_leaf(p, &merkle::block_root(&block));
            merkle::verify_path(root, size.trailing_zeros(), p, leaf, &path).unwrap();
        }
    }
    let levels: Vec<u32> = v.levels.iter().map(|l| l.0).collect();
    let ref_levels: Vec<u32> = (0..reference.log_blocks()).filter(|l| reference.level(*l).unwrap().is_some()).collect();
    assert_eq!(levels, ref_levels, "{ctx}");
}

/// Uploads random blocks in random batches; returns the reference and σ̃.
fn upload(store: &Store, rng: &mut StdRng, n: u64, beta: usize, nonce: &mut u64) -> (ServerState, Vec<[u8; 32]>) {
    let blocks: Vec<Vec<u8>> = (0..n).map(|_| random_block(rng, beta)).collect();
    let sealed: Vec<[u8; 32]> = (0..n).map(|_| rng.gen()).collect();
    let params = DealParams { deal: DEAL, owner: Address::repeat_byte(1), num_blocks: n, block_bytes: beta as u32 };
    *nonce += 1;
    store.upload_begin(params, *nonce).unwrap();
    let mut start = 0u64;
    while start < n {
        let len = rng.gen_range(1..=(n - start).min(5));
        *nonce += 1;
        let r = start as usize..(start + len) as usize;
        store.upload_blocks(DEAL, *nonce, start, blocks[r.clone()].to_vec(), &sealed[r]).unwrap();
        start += len;
        assert_eq!(store.view(DEAL).unwrap().phase, Phase::Uploading { received: start });
    }
    *nonce += 1;
    let (root_u, c, root_c) = store.upload_finish(DEAL, *nonce).unwrap();
    let reference = ServerState::new(BlockFormat::new(beta).unwrap(), blocks).unwrap();
    assert_eq!(root_u, merkle::u_tree(reference.u(), &sealed).unwrap().root());
    assert_eq!(c, reference.c().id());
    assert_eq!(root_c, merkle::run_tree(&ref_run_bytes(reference.format(), reference.c())).unwrap().root());
    (reference, sealed)
}

#[test]
fn random_writes_match_the_reference_across_reopens() {
    for (seed, n, beta) in [(1u64, 8u64, 16usize), (2, 16, 16), (3, 4, 7), (4, 1, 16), (5, 16, 100)] {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut store = open(dir.path());
        let mut nonce = 0;
        let (mut reference, mut sealed) = upload(&store, &mut rng, n, beta, &mut nonce);
        check(&store, &reference, &sealed, "after upload");
        let writes = 3 * n + 3;
        let mut before_last = store.view(DEAL).unwrap();
        for w in 0..writes {
            before_last = store.view(DEAL).unwrap();
            let index = rng.gen_range(0..n);
            let block = random_block(&mut rng, beta);
            let s: [u8; 32] = rng.gen();
            nonce += rng.gen_range(1..3);
            let out = store.write(DEAL, nonce, index, block.clone(), s).unwrap();
            let step = reference.write(index, block).unwrap();
            sealed[index as usize] = s;
            assert_eq!(out.step, step);
            let ctx = format!("seed {seed}, write {w}");
            assert_eq!(out.root_u, merkle::u_tree(reference.u(), &sealed).unwrap().root(), "{ctx}");
            check(&store, &reference, &sealed, &ctx);
            if rng.gen_ratio(1, 5) {
                drop(store);
                store = open(dir.path());
                check(&store, &reference, &sealed, &format!("{ctx}, reopened"));
            }
        }
        assert_eq!(reference.rebuild_count(), writes / n);
        // Only the current runs' files are left (no pins), and those of the state
        // before the last write, which the owner has not confirmed yet.
        let names = |v: &dpor_node::store::DealView| {
            let mut ids = vec![v.c.0];
            ids.extend(v.levels.iter().map(|(_, id, _)| *id));
            ids.into_iter().map(|id| format!("run-{}-{}.blocks", id.tag.0, id.built_at)).collect::<Vec<_>>()
        };
        let v = store.view(DEAL).unwrap();
        let mut want = names(&v);
        want.extend(names(&before_last));
        want.sort();
        want.dedup();
        assert_eq!(run_files(dir.path()), want, "seed {seed}");
        // The owner's next request (a σ̃ store) confirms: the previous state goes.
        nonce += 1;
        store.store_sealed(DEAL, nonce, v.c.0, 0, &[[1; 32]]).unwrap();
        let mut want = names(&v);
        want.sort();
        assert_eq!(run_files(dir.path()), want, "seed {seed}, confirmed");
    }
}

/// Names of the `.blocks` run files of the deal, sorted; asserts there is a tree
/// for each and nothing else (no tmp files).
fn run_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir.join("deals").join(DEAL.to_string())).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(!name.ends_with(".tmp"), "stray {name}");
        if let Some(stem) = name.strip_suffix(".blocks") {
            if stem.starts_with("run-") {
                out.push(name.clone());
            }
        }
        if let Some(stem) = name.strip_suffix(".tree") {
            assert!(dir.join("deals").join(DEAL.to_string()).join(format!("{stem}.blocks")).exists(), "{name} alone");
        }
    }
    out.sort();
    out
}

/// Every run of `d` reads back whole and hashes to the digest's root.
fn assert_digest_runs(store: &Store, d: &Digest) {
    for (id, size, root) in d.run_ids() {
        let blocks = store.coded_range(DEAL, id, 0, size).unwrap();
        assert_eq!(merkle::run_tree(&blocks).unwrap().root(), root, "run {id} of digest v{}", d.version);
        let (b, path) = store.coded(DEAL, id, &[size - 1]).unwrap().pop().unwrap();
        let leaf = merkle::run_leaf(size - 1, &merkle::block_root(&b));
        merkle::verify_path(&root, size.trailing_zeros(), size - 1, leaf, &path).unwrap();
    }
}

#[test]
fn pinned_digests_keep_their_runs_until_unpinned() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(99);
    let mut store = open(dir.path());
    let mut nonce = 0;
    let (n, beta) = (8u64, 16usize);
    let (mut reference, mut sealed) = upload(&store, &mut rng, n, beta, &mut nonce);
    let mut write = |store: &Store, reference: &mut ServerState, sealed: &mut Vec<[u8; 32]>, nonce: &mut u64| {
        let index = rng.gen_range(0..n);
        let block = random_block(&mut rng, beta);
        let s: [u8; 32] = rng.gen();
        *nonce += 1;
        store.write(DEAL, *nonce, index, block.clone(), s).unwrap();
        reference.write(index, block).unwrap();
        sealed[index as usize] = s;
    };
    for _ in 0..3 {
        write(&store, &mut reference, &mut sealed, &mut nonce);
    }
    // t = 3: C@0, H0, H1 live. Co-sign v1: its runs are pinned by the co-signature
    // alone while the levels are consumed.
    let d1 = digest_of(&store.view(DEAL).unwrap(), 1);
    store.check_cosign(DEAL, &d1).unwrap();
    assert_eq!(d1.run_ids().len(), 3);
    for _ in 0..2 {
        write(&store, &mut reference, &mut sealed, &mut nonce);
        assert_digest_runs(&store, &d1);
    }
    store.set_posted(DEAL, &d1).unwrap();
    // Past a C-rebuild: every run of d1 is superseded, yet still served.
    for _ in 0..n {
        write(&store, &mut reference, &mut sealed, &mut nonce);
        assert_digest_runs(&store, &d1);
    }
    check(&store, &reference, &sealed, "pinned");
    drop(store);
    store = open(dir.path());
    assert_digest_runs(&store, &d1);
    check(&store, &reference, &sealed, "pinned, reopened");
    // A newer co-signature: d1 stays pinned by the posted pin (and a dispute).
    store.pin_dispute(DEAL, 42, &d1).unwrap();
    let d2 = digest_of(&store.view(DEAL).unwrap(), 2);
    store.check_cosign(DEAL, &d2).unwrap();
    write(&store, &mut reference, &mut sealed, &mut nonce);
    store.unpin_dispute(DEAL, 42).unwrap();
    assert_digest_runs(&store, &d1);
    // Posting d2 leaves d1 pinned by a dispute only.
    store.pin_dispute(DEAL, 43, &d1).unwrap();
    store.set_posted(DEAL, &d2).unwrap();
    store.set_posted(DEAL, &d1).unwrap(); // older: ignored
    assert_eq!(store.view(DEAL).unwrap().posted, Some(d2.clone()));
    assert_eq!(store.view(DEAL).unwrap().disputes, vec![43]);
    for _ in 0..3 {
        write(&store, &mut reference, &mut sealed, &mut nonce);
    }
    assert_digest_runs(&store, &d1);
    assert_digest_runs(&store, &d2);
    // Unpinning the dispute drops d1's runs (files and reads).
    let old: Vec<(RunId, String)> = d1
        .run_ids()
        .into_iter()
        .map(|(id, _, _)| (id, format!("run-{}-{}.blocks", id.tag.0, id.built_at)))
        .collect();
    store.unpin_dispute(DEAL, 43).unwrap();
    let files = run_files(dir.path());
    let d2_ids: Vec<RunId> = d2.run_ids().into_iter().map(|r| r.0).collect();
    for (id, name) in &old {
        if d2_ids.contains(id) {
            continue;
        }
        assert!(!files.contains(name), "{name} survived");
        assert!(matches!(store.coded(DEAL, *id, &[0]), Err(StoreError::UnknownRun { .. })));
        assert!(matches!(store.run_file(DEAL, *id), Err(StoreError::UnknownRun { .. })));
    }
    assert_digest_runs(&store, &d2);
    let cur = store.view(DEAL).unwrap();
    let mut retained: Vec<RunId> = d2_ids.clone();
    retained.push(cur.c.0);
    retained.extend(cur.levels.iter().map(|l| l.1));
    retained.sort();
    retained.dedup();
    let mut want: Vec<String> = retained.iter().map(|id| format!("run-{}-{}.blocks", id.tag.0, id.built_at)).collect();
    want.sort();
    assert_eq!(files, want);
    check(&store, &reference, &sealed, "end");
}

#[test]
fn sealed_checksums_of_runs_are_stored_and_collected() {
    sealed_checksums_case(false);
}

/// The same with a background builder running: garbage collection hands the runs it
/// drops to the builder (files and σ̃ deleted off the request path), and once the
/// builder stops nothing of them is left.
#[test]
fn sealed_checksums_of_runs_are_collected_by_the_background_builder() {
    sealed_checksums_case(true);
}

fn sealed_checksums_case(background: bool) {
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let store = Arc::new(open(dir.path()));
    let builder = background.then(|| dpor_node::store::Builder::start(&store));
    let mut nonce = 0;
    let (n, beta) = (4u64, 16usize);
    let _ = upload(&store, &mut rng, n, beta, &mut nonce);
    let c = store.view(DEAL).unwrap().c.0;
    let s: Vec<[u8; 32]> = (0..3).map(|i| [i as u8 + 1; 32]).collect();
    nonce += 1;
    store.store_sealed(DEAL, nonce, c, 2, &s).unwrap();
    let got = store.sealed(DEAL, c, 0, 2 * n).unwrap();
    assert_eq!(got, vec![None, None, Some(s[0]), Some(s[1]), Some(s[2]), None, None, None]);
    assert!(matches!(store.store_sealed(DEAL, nonce + 1, c, 6, &s), Err(StoreError::Range(_))));
    // A write's run gets σ̃ too; after the level is consumed its entries are gone.
    nonce += 1;
    let out = store.write(DEAL, nonce, 1, vec![3; beta], [9; 32]).unwrap();
    nonce += 1;
    store.store_sealed(DEAL, nonce, out.run, 0, &[[7; 32], [8; 32]]).unwrap();
    assert_eq!(store.sealed(DEAL, out.run, 0, 2).unwrap(), vec![Some([7; 32]), Some([8; 32])]);
    for i in 0..n - 1 {
        nonce += 1;
        store.write(DEAL, nonce, i, vec![i as u8; beta], [1; 32]).unwrap();
    }
    // The last write was a C-rebuild: the state before it (old C included) keeps its
    // files and σ̃ until the owner's next request confirms it has the answer.
    assert!(matches!(store.sealed(DEAL, out.run, 0, 2), Err(StoreError::UnknownRun { .. })));
    assert_eq!(store.sealed(DEAL, c, 2, 1).unwrap(), vec![Some(s[0])]);
    let new_c = store.view(DEAL).unwrap().c.0;
    assert_ne!(new_c, c);
    nonce += 1;
    store.store_sealed(DEAL, nonce, new_c, 0, &[[5; 32]]).unwrap();
    assert!(matches!(store.sealed(DEAL, c, 0, 1), Err(StoreError::UnknownRun { .. })));
    // Stopping the builder deletes what it was handed.
    drop(builder);
    let v = store.view(DEAL).unwrap();
    let mut want: Vec<String> = std::iter::once(v.c.0).chain(v.levels.iter().map(|l| l.1)).map(|id| format!("run-{}-{}.blocks", id.tag.0, id.built_at)).collect();
    want.sort();
    assert_eq!(run_files(dir.path()), want, "background {background}: only the live runs' files remain");
    drop(Arc::try_unwrap(store).expect("no other handle"));
    // sled releases its lock a moment after the drop: open_metadata_db waits for it.
    let db = dpor_node::store::open_metadata_db(dir.path()).unwrap();
    assert_eq!(db.scan_prefix(b"s").count(), 1, "σ̃ of collected runs remain (only the new C's one is live)");
}

#[test]
fn reads_during_writes_see_whole_states() {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let store = Arc::new(open(dir.path()));
    let mut nonce = 0;
    let (n, beta) = (16u64, 16usize);
    let _ = upload(&store, &mut rng, n, beta, &mut nonce);
    let committed = Arc::new(Mutex::new(HashSet::from([store.view(DEAL).unwrap().root_u])));
    let done = Arc::new(AtomicBool::new(false));
    // Each reader reads once before the writes start (a reader not scheduled before
    // the last write would otherwise see nothing) and goes on until they end.
    let first_reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let readers: Vec<_> = (0..2)
        .map(|k| {
            let (store, done, first_reads) = (Arc::clone(&store), Arc::clone(&done), Arc::clone(&first_reads));
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut i = k;
                loop {
                    let (block, s, path) = store.read(DEAL, i % n).unwrap();
                    let leaf = merkle::u_leaf(i % n, &merkle::block_root(&block), &s);
                    seen.push(merkle::root_from_path(leaf, i % n, &path));
                    let v = store.view(DEAL).unwrap();
                    // The run may be collected between view and read: then UnknownRun.
                    match store.coded(DEAL, v.c.0, &[0]) {
                        Ok(mut r) => {
                            let (b, p) = r.pop().unwrap();
                            merkle::verify_path(&v.c.1, (2 * n).trailing_zeros(), 0, merkle::run_leaf(0, &merkle::block_root(&b)), &p).unwrap();
                        }
                        Err(StoreError::UnknownRun { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                    if i == k {
                        first_reads.fetch_add(1, Ordering::SeqCst);
                    }
                    i += 1;
                    if done.load(Ordering::Relaxed) {
                        break;
                    }
                }
                seen
            })
        })
        .collect();
    // (A reader that failed has finished: its join below reports it.)
    while first_reads.load(Ordering::SeqCst) < 2 && !readers.iter().any(|r| r.is_finished()) {
        std::thread::yield_now();
    }
    for w in 0..3 * n {
        nonce += 1;
        let out = store.write(DEAL, nonce, w % n, vec![w as u8; beta], [w as u8; 32]).unwrap();
        committed.lock().unwrap().insert(out.root_u);
    }
    done.store(true, Ordering::Relaxed);
    let committed = committed.lock().unwrap();
    for r in readers {
        let seen = r.join().unwrap();
        assert!(!seen.is_empty());
        for root in seen {
            assert!(committed.contains(&root), "a read saw a torn state");
        }
    }
}

/// Reopening a store while a handle on its database is still closing (sled releases its
/// file lock only when its background work on the handle ends) waits for the lock
/// instead of failing with "could not acquire lock … WouldBlock".
#[test]
fn reopening_waits_for_a_handle_that_is_still_closing() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let db = dpor_node::store::open_metadata_db(dir.path()).unwrap();
    let (opened_tx, opened_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        // Hold the lock until the main thread is about to open, then a little longer.
        let _ = opened_rx.recv();
        std::thread::sleep(std::time::Duration::from_millis(200));
        drop(db);
    });
    opened_tx.send(()).unwrap();
    let store = Store::open(dir.path(), StoreConfig::default()).expect("the reopen waits for the lock");
    holder.join().unwrap();
    drop(store);
}

/// Issue 11 #1: batches of writes (random lengths up to 3N, crossing C-rebuilds, with
/// repeated indices, mixed with single writes, reopening midway) leave exactly the
/// state of the same writes one by one on the reference; the answer names exactly the
/// runs of the new state that the batch built; an invalid batch changes nothing.
#[test]
fn batches_match_the_reference_written_one_by_one() {
    for (seed, n, beta) in [(11u64, 8u64, 16usize), (12, 16, 16), (13, 4, 7), (14, 1, 16), (15, 32, 100)] {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut store = open(dir.path());
        let mut nonce = 0;
        let (mut reference, mut sealed) = upload(&store, &mut rng, n, beta, &mut nonce);
        for round in 0..12 {
            let ctx = format!("seed {seed}, batch {round}");
            let before = reference.total_writes();
            let len = rng.gen_range(1..=3 * n as usize);
            let writes: Vec<(u64, Vec<u8>, [u8; 32])> =
                (0..len).map(|_| (rng.gen_range(0..n.min(4)) * (n / n.min(4)), random_block(&mut rng, beta), rng.gen())).collect();
            nonce += 1;
            let out = store.write_batch(DEAL, nonce, writes.clone()).unwrap();
            for (index, block, s) in writes {
                reference.write(index, block).unwrap();
                sealed[index as usize] = s;
            }
            assert_eq!(out.count, len as u64, "{ctx}");
            assert_eq!(out.root_u, merkle::u_tree(reference.u(), &sealed).unwrap().root(), "{ctx}");
            let built: Vec<(RunId, B256)> = reference
                .runs()
                .into_iter()
                .filter(|r| r.built_at > before)
                .map(|r| (r.id(), merkle::run_tree(&ref_run_bytes(reference.format(), r)).unwrap().root()))
                .collect();
            assert_eq!(out.runs, built, "{ctx}: runs named in the answer");
            check(&store, &reference, &sealed, &ctx);
            if rng.gen_ratio(1, 3) {
                drop(store);
                store = open(dir.path());
                check(&store, &reference, &sealed, &format!("{ctx}, reopened"));
            }
            // A single write in between.
            let index = rng.gen_range(0..n);
            let block = random_block(&mut rng, beta);
            let s: [u8; 32] = rng.gen();
            nonce += 1;
            store.write(DEAL, nonce, index, block.clone(), s).unwrap();
            reference.write(index, block).unwrap();
            sealed[index as usize] = s;
            check(&store, &reference, &sealed, &format!("{ctx}, single write after"));
        }
        assert!(reference.rebuild_count() >= 2, "seed {seed}: batches crossed C-rebuilds");
        // Invalid batches change nothing: a bad index or size anywhere, an empty one, a replay.
        let view = store.view(DEAL).unwrap();
        let good = (0u64, vec![1u8; beta], [1u8; 32]);
        nonce += 1;
        assert!(matches!(store.write_batch(DEAL, nonce, vec![good.clone(), (n, vec![1u8; beta], [1; 32])]), Err(StoreError::Index { .. })));
        assert!(matches!(store.write_batch(DEAL, nonce, vec![good.clone(), (0, vec![1u8; beta + 1], [1; 32])]), Err(StoreError::BlockSize { .. })));
        assert!(matches!(store.write_batch(DEAL, nonce, vec![]), Err(StoreError::Range(_))));
        assert!(matches!(store.write_batch(DEAL, nonce - 1, vec![good]), Err(StoreError::Replay { .. })));
        assert_eq!(store.view(DEAL).unwrap(), view, "seed {seed}: refused batches changed the state");
        check(&store, &reference, &sealed, "after refused batches");
    }
}

/// Issue 11 #3 (deamortized rebuilds, §6.1): with every run of ≥ 4 coded blocks built
/// after its write is acknowledged, random batches (mostly single writes, some longer,
/// some through the synchronous `write`) leave exactly the reference's state. Builds
/// run at random moments (the background builder's work, or on demand when a read, a
/// write or `settle` needs them), the store is reopened with builds still pending (a
/// crash), and blocks overwritten while a C-rebuild is pending must not leak into it.
/// With `threaded`, the background builder thread runs throughout.
fn deferred_builds_case(seed: u64, n: u64, beta: usize, threaded: bool) {
    use dpor_node::store::Builder;
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig { defer_from_blocks: Some(4), ..Default::default() };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut store = Arc::new(Store::open(dir.path(), config.clone()).unwrap());
    let mut builder = threaded.then(|| Builder::start(&store));
    let mut nonce = 0;
    let (mut reference, mut sealed) = upload(&store, &mut rng, n, beta, &mut nonce);
    let mut deferred_seen = 0;
    for round in 0..(6 * n as usize + 10) {
        let ctx = format!("seed {seed}, round {round}");
        let before = reference.total_writes();
        let len = if rng.gen_ratio(3, 4) { 1 } else { rng.gen_range(2..=n as usize + 1) };
        let writes: Vec<(u64, Vec<u8>, [u8; 32])> = (0..len).map(|_| (rng.gen_range(0..n), random_block(&mut rng, beta), rng.gen())).collect();
        nonce += 1;
        if len == 1 && rng.gen_ratio(1, 6) {
            let (index, block, s) = writes[0].clone();
            store.write(DEAL, nonce, index, block, s).unwrap();
        } else {
            let out = store.write_batch(DEAL, nonce, writes.clone()).unwrap();
            let mut probe = reference.clone();
            for (index, block, _) in &writes {
                probe.write(*index, block.clone()).unwrap();
            }
            let built: Vec<RunId> = probe.runs().into_iter().filter(|r| r.built_at > before).map(|r| r.id()).collect();
            assert_eq!(out.runs.iter().map(|(id, _)| *id).collect::<Vec<_>>(), built, "{ctx}: runs named");
            for ((id, root), r) in out.runs.iter().zip(probe.runs().into_iter().filter(|r| r.built_at > before)) {
                if *root == B256::ZERO {
                    deferred_seen += 1;
                } else {
                    assert_eq!(*root, merkle::run_tree(&ref_run_bytes(probe.format(), r)).unwrap().root(), "{ctx}: root of {id}");
                }
            }
        }
        for (index, block, s) in writes {
            reference.write(index, block).unwrap();
            sealed[index as usize] = s;
        }
        // U is current at once, whatever is still being built.
        assert_eq!(store.u_blocks(DEAL, 0, n).unwrap(), reference.u(), "{ctx}: U");
        assert_eq!(store.view(DEAL).unwrap().root_u, merkle::u_tree(reference.u(), &sealed).unwrap().root(), "{ctx}");
        match rng.gen_range(0..4) {
            0 => {
                store.build_deferred();
            }
            1 => {
                // A crash with builds pending: reopen.
                drop(builder.take());
                drop(Arc::try_unwrap(store).expect("no other handle"));
                store = Arc::new(Store::open(dir.path(), config.clone()).unwrap());
                builder = threaded.then(|| Builder::start(&store));
            }
            2 => {
                store.settle(DEAL).unwrap();
                check(&store, &reference, &sealed, &ctx);
            }
            _ => {}
        }
    }
    store.settle(DEAL).unwrap();
    check(&store, &reference, &sealed, &format!("seed {seed}, settled"));
    assert!(reference.rebuild_count() >= 4, "seed {seed}: C-rebuilds crossed");
    assert!(deferred_seen > 0, "seed {seed}: some runs were deferred");
    // Nothing is left of the builds or of the runs they replaced: no tmp files, only
    // the runs of the current state and of the one before the last write (the
    // owner has not confirmed it), once the builder (which deletes what garbage
    // collection handed it) has stopped.
    drop(builder);
    let v = store.view(DEAL).unwrap();
    let mut want: Vec<String> = std::iter::once(v.c.0)
        .chain(v.levels.iter().map(|l| l.1))
        .chain(v.previous.iter().copied())
        .map(|id| format!("run-{}-{}.blocks", id.tag.0, id.built_at))
        .collect();
    want.sort();
    want.dedup();
    assert_eq!(run_files(dir.path()), want, "seed {seed}: files left");
}

#[test]
fn deferred_builds_match_the_reference() {
    for (seed, n, beta) in [(21u64, 8u64, 16usize), (22, 16, 16), (23, 4, 7), (24, 32, 40)] {
        deferred_builds_case(seed, n, beta, false);
    }
}

#[test]
fn deferred_builds_match_the_reference_with_the_background_builder() {
    for (seed, n, beta) in [(31u64, 16u64, 16usize), (32, 32, 40)] {
        deferred_builds_case(seed, n, beta, true);
    }
}

/// Resize (App. A.3) against `ServerState::resize`: grow and shrink with writes
/// between, reopening, a posted pre-resize digest whose runs (with the old N) stay
/// served, and U's files cut back on open when a growth never committed.
#[test]
fn resizes_match_the_reference_and_keep_pinned_digests() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(77);
    let mut store = open(dir.path());
    let mut nonce = 0;
    let beta = 24usize;
    let (mut reference, mut sealed) = upload(&store, &mut rng, 4, beta, &mut nonce);
    let write = |store: &Store, reference: &mut ServerState, sealed: &mut Vec<[u8; 32]>, nonce: &mut u64, rng: &mut StdRng| {
        let index = rng.gen_range(0..reference.num_blocks());
        let block = random_block(rng, beta);
        let s: [u8; 32] = rng.gen();
        *nonce += 1;
        store.write(DEAL, *nonce, index, block.clone(), s).unwrap();
        reference.write(index, block).unwrap();
        sealed[index as usize] = s;
    };
    for _ in 0..5 {
        write(&store, &mut reference, &mut sealed, &mut nonce, &mut rng);
    }
    let old = digest_of(&store.view(DEAL).unwrap(), 1);
    store.check_cosign(DEAL, &old).unwrap();
    store.set_posted(DEAL, &old).unwrap();
    for (to, writes) in [(16u64, 19usize), (2, 3), (8, 9)] {
        let from = reference.num_blocks();
        nonce += 1;
        let out = store.resize(DEAL, nonce, to).unwrap();
        reference.resize(to).unwrap();
        sealed.resize(to as usize, dpor_core::checksum::ZERO_BLOCK_U);
        let ctx = format!("resized {from} → {to}");
        assert_eq!(out.run, reference.c().id(), "{ctx}");
        assert_eq!(out.root_u, merkle::u_tree(reference.u(), &sealed).unwrap().root(), "{ctx}");
        assert_eq!(store.view(DEAL).unwrap().params.num_blocks, to);
        check(&store, &reference, &sealed, &ctx);
        // The posted digest from before the first resize is still served whole.
        assert_digest_runs(&store, &old);
        drop(store);
        store = open(dir.path());
        check(&store, &reference, &sealed, &format!("{ctx}, reopened"));
        assert_digest_runs(&store, &old);
        for _ in 0..writes {
            write(&store, &mut reference, &mut sealed, &mut nonce, &mut rng);
        }
        check(&store, &reference, &sealed, &format!("{ctx}, then writes"));
    }
    // A resize to the same N, or to a size that is not a power of two, changes nothing.
    let before = store.view(DEAL).unwrap();
    for bad in [8u64, 6, 0] {
        nonce += 1;
        assert!(matches!(store.resize(DEAL, nonce, bad), Err(StoreError::Params(_))), "{bad}");
    }
    assert_eq!(store.view(DEAL).unwrap().root_u, before.root_u);
    // A growth whose commit never happened (files extended, record still at N = 8):
    // the files are cut back on open and the state is the committed one.
    drop(store);
    let u_blocks = dir.path().join("deals").join(DEAL.to_string()).join("u.blocks");
    let f = std::fs::OpenOptions::new().write(true).open(&u_blocks).unwrap();
    f.set_len(64 * beta as u64).unwrap();
    drop(f);
    store = open(dir.path());
    assert_eq!(std::fs::metadata(&u_blocks).unwrap().len(), 8 * beta as u64);
    check(&store, &reference, &sealed, "after an uncommitted growth");
}

/// Issue 22: every co-signed digest above the posted version keeps its runs (the owner
/// could still post it and dispute it), across a restart, until a digest of at least
/// its version is posted; the store names the newest one the node may post itself
/// only while an older one waits too; at most `MAX_UNPOSTED_COSIGNS` wait.
#[test]
fn cosigned_digests_not_posted_keep_their_runs_until_a_newer_one_is_posted() {
    use dpor_node::store::{CosignKind, MAX_UNPOSTED_COSIGNS};
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(22);
    let mut store = open(dir.path());
    let mut nonce = 0;
    let (n, beta) = (8u64, 16usize);
    upload(&store, &mut rng, n, beta, &mut nonce);
    let mut write = |store: &Store, nonce: &mut u64| {
        let index = rng.gen_range(0..n);
        let block = random_block(&mut rng, beta);
        *nonce += 1;
        store.write(DEAL, *nonce, index, block, rng.gen()).unwrap();
    };
    let sigs = |v: u64| (vec![v as u8; 65], vec![0x80 | v as u8; 65]);
    let cosign = |store: &Store, version: u64| {
        let d = digest_of(&store.view(DEAL).unwrap(), version);
        let (o, p) = sigs(version);
        assert_eq!(store.cosign(DEAL, &d, CosignKind::Digest, o, || Ok(p.clone())).unwrap(), p);
        d
    };
    let d1 = cosign(&store, 1);
    store.set_posted(DEAL, &d1).unwrap();
    // v2 at t = 1 (level 0), v3 at t = 2 (level 0 consumed into level 1).
    write(&store, &mut nonce);
    let d2 = cosign(&store, 2);
    assert_eq!(store.cosigned_to_post(DEAL).unwrap(), None, "one waiting digest: the owner posts it");
    write(&store, &mut nonce);
    let d3 = cosign(&store, 3);
    let level0 = d2.run_ids()[1].0;
    assert!(!d3.run_ids().iter().any(|r| r.0 == level0));
    // v2's level 0 is in neither the current state nor the latest co-signed digest,
    // and survives (a restart too): the owner could post v2 and dispute it.
    write(&store, &mut nonce);
    assert_digest_runs(&store, &d2);
    drop(store);
    store = open(dir.path());
    assert_digest_runs(&store, &d2);
    assert_digest_runs(&store, &d3);
    assert_eq!(store.unposted(DEAL).unwrap().iter().map(|c| c.digest.version).collect::<Vec<_>>(), vec![2, 3]);
    // The node should post v3 itself, with the signatures it kept.
    let post = store.cosigned_to_post(DEAL).unwrap().expect("v3 to post");
    assert_eq!((post.digest.clone(), post.owner_sig.clone(), post.provider_sig.clone()), (d3.clone(), sigs(3).0, sigs(3).1));
    // Once v3 is posted, v2 can never be: its level 0 goes.
    store.set_posted(DEAL, &d3).unwrap();
    assert!(store.unposted(DEAL).unwrap().is_empty());
    assert!(matches!(store.coded(DEAL, level0, &[0]), Err(StoreError::UnknownRun { .. })));
    assert!(!run_files(dir.path()).contains(&format!("run-{}-{}.blocks", level0.tag.0, level0.built_at)));
    assert_digest_runs(&store, &d3);
    // A co-signature without signatures (check_cosign) is kept and pinned, but the
    // node cannot post it: nothing to post.
    write(&store, &mut nonce);
    store.check_cosign(DEAL, &digest_of(&store.view(DEAL).unwrap(), 4)).unwrap();
    write(&store, &mut nonce);
    store.check_cosign(DEAL, &digest_of(&store.view(DEAL).unwrap(), 5)).unwrap();
    assert_eq!(store.cosigned_to_post(DEAL).unwrap(), None);
    // The bound: at most MAX_UNPOSTED_COSIGNS wait; the next is refused, nothing changes.
    let mut v = 6;
    while store.unposted(DEAL).unwrap().len() < MAX_UNPOSTED_COSIGNS {
        write(&store, &mut nonce);
        cosign(&store, v);
        v += 1;
    }
    write(&store, &mut nonce);
    let over = digest_of(&store.view(DEAL).unwrap(), v);
    let r = store.cosign(DEAL, &over, CosignKind::Digest, vec![1; 65], || panic!("must not sign past the bound"));
    assert!(matches!(r, Err(StoreError::Unposted { .. })), "{r:?}");
    assert_eq!(store.view(DEAL).unwrap().cosigned.map(|d| d.version), Some(v - 1));
    // Posting the newest releases all of them; co-signing works again.
    let newest = store.cosigned_to_post(DEAL).unwrap().expect("newest").digest;
    store.set_posted(DEAL, &newest).unwrap();
    assert!(store.unposted(DEAL).unwrap().is_empty());
    store.cosign(DEAL, &over, CosignKind::Digest, vec![1; 65], || Ok(vec![2; 65])).unwrap();
}

/// Issue 23 #3: a level a write wrote is kept in memory (`run_cache.rs`) and the write
/// that consumes it takes it from there. Shown by damaging the level's file between
/// the two writes: with the cache the consuming write still builds the reference's
/// run (the bytes it needs were never read back); with the cache off (`Some(0)`) the
/// same write reads the damaged file and either refuses it or builds another run.
#[test]
fn a_consumed_level_is_taken_from_memory_not_read_back() {
    for (cache, expect_reference) in [(None, true), (Some(0), false)] {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(23);
        let store = Store::open(dir.path(), StoreConfig { run_cache_bytes: cache, ..Default::default() }).unwrap();
        let (n, beta) = (16u64, 64usize);
        let mut nonce = 0;
        let (mut reference, mut sealed) = upload(&store, &mut rng, n, beta, &mut nonce);
        // A batch of 3 writes leaves levels 0 and 1 (t = 3), both written by the batch.
        let writes: Vec<(u64, Vec<u8>, [u8; 32])> = (0..3).map(|i| (i * 5, random_block(&mut rng, beta), rng.gen())).collect();
        nonce += 1;
        store.write_batch(DEAL, nonce, writes.clone()).unwrap();
        for (index, block, s) in writes {
            reference.write(index, block).unwrap();
            sealed[index as usize] = s;
        }
        check(&store, &reference, &sealed, "after the batch");
        // Every element of the levels' block files set to 1 (canonical, wrong).
        let v = store.view(DEAL).unwrap();
        assert_eq!(v.levels.iter().map(|l| l.0).collect::<Vec<_>>(), vec![0, 1]);
        let deal_dir = dir.path().join("deals").join(DEAL.to_string());
        let mut hit = 0;
        for name in run_files(dir.path()) {
            let path = deal_dir.join(&name);
            let len = std::fs::metadata(&path).unwrap().len() as usize;
            let is_level = v.levels.iter().any(|(_, id, _)| name == format!("run-{}-{}.blocks", id.tag.0, id.built_at));
            if is_level {
                std::fs::write(&path, 1u64.to_le_bytes().repeat(len / 8)).unwrap();
                hit += 1;
            }
        }
        assert_eq!(hit, 2, "both level files found: {:?}", run_files(dir.path()));
        // The write at t = 3 builds level 2 from levels 0 and 1.
        let block = random_block(&mut rng, beta);
        nonce += 1;
        let built = store.write(DEAL, nonce, 7, block.clone(), [7; 32]);
        reference.write(7, block).unwrap();
        sealed[7] = [7; 32];
        let reference_root = merkle::run_tree(&ref_run_bytes(reference.format(), reference.level(2).unwrap().unwrap())).unwrap().root();
        let matches = built.as_ref().is_ok_and(|out| out.run_root == reference_root);
        assert_eq!(matches, expect_reference, "cache {cache:?}: {built:?}");
        if expect_reference {
            check(&store, &reference, &sealed, "after the consuming write");
        }
    }
}

/// Issue 23 #2: an upload's C is built while its blocks arrive (`upload_stream.rs`),
/// not from U read back at `upload_finish`. Shown by damaging U's blocks file after
/// the last block is in: with the stream, C is still the reference's (the damaged
/// bytes were never read); with streams off (`Some(0)`), C is built from the damaged
/// file and differs. A store reopened mid-upload (no stream any more) and an upload
/// begun again with other blocks both end with the reference's C.
#[test]
fn c_is_built_while_u_arrives_not_from_u_read_back() {
    let (n, beta) = (64u64, 48usize);
    let format = BlockFormat::new(beta).unwrap();
    let params = DealParams { deal: DEAL, owner: Address::repeat_byte(1), num_blocks: n, block_bytes: beta as u32 };
    let reference_root = |blocks: &[Vec<u8>]| {
        let reference = ServerState::new(format, blocks.to_vec()).unwrap();
        merkle::run_tree(&ref_run_bytes(&format, reference.c())).unwrap().root()
    };
    let send = |store: &Store, blocks: &[Vec<u8>], from: u64, to: u64, nonce: &mut u64| {
        let mut start = from;
        while start < to {
            let end = (start + 13).min(to);
            *nonce += 1;
            let r = start as usize..end as usize;
            store.upload_blocks(DEAL, *nonce, start, blocks[r.clone()].to_vec(), &vec![[3; 32]; r.len()]).unwrap();
            start = end;
        }
    };
    for (streams, expect_reference) in [(None, true), (Some(0), false)] {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(231);
        let store = Store::open(dir.path(), StoreConfig { upload_stream_bytes: streams, ..Default::default() }).unwrap();
        let blocks: Vec<Vec<u8>> = (0..n).map(|_| random_block(&mut rng, beta)).collect();
        let mut nonce = 1;
        store.upload_begin(params, nonce).unwrap();
        send(&store, &blocks, 0, n, &mut nonce);
        let u_file = dir.path().join("deals").join(DEAL.to_string()).join("u.blocks");
        let len = std::fs::metadata(&u_file).unwrap().len() as usize;
        std::fs::write(&u_file, vec![0x5a; len]).unwrap();
        nonce += 1;
        let (_, _, root_c) = store.upload_finish(DEAL, nonce).unwrap();
        assert_eq!(root_c == reference_root(&blocks), expect_reference, "streams {streams:?}");
    }
    // Reopened mid-upload: the rest arrives without a stream; C from U read back.
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(232);
    let blocks: Vec<Vec<u8>> = (0..n).map(|_| random_block(&mut rng, beta)).collect();
    let mut nonce = 1;
    {
        let store = open(dir.path());
        store.upload_begin(params, nonce).unwrap();
        send(&store, &blocks, 0, 30, &mut nonce);
    }
    let store = open(dir.path());
    send(&store, &blocks, 30, n, &mut nonce);
    nonce += 1;
    assert_eq!(store.upload_finish(DEAL, nonce).unwrap().2, reference_root(&blocks));
    // An upload begun again with other blocks: the first stream is dropped.
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let first: Vec<Vec<u8>> = (0..n).map(|_| random_block(&mut rng, beta)).collect();
    let mut nonce = 1;
    store.upload_begin(params, nonce).unwrap();
    send(&store, &first, 0, 40, &mut nonce);
    nonce += 1;
    store.upload_begin(params, nonce).unwrap();
    send(&store, &blocks, 0, n, &mut nonce);
    nonce += 1;
    assert_eq!(store.upload_finish(DEAL, nonce).unwrap().2, reference_root(&blocks));
}
