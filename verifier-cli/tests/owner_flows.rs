//! The owner's flows against a real node in-process (store on disk, handler, libp2p
//! over loopback), with the chain replaced by a fixed deal table: upload, writes
//! through several H rebuilds and C-rebuilds (each verified by the owner), reads,
//! download and extraction checked against a plain array as the model of the file,
//! extraction after zeroing just under half of every run on disk, a cheating
//! node caught by the owner's spot-check, and byte-range writes and syncs (growing and
//! shrinking the file) against a plain byte array.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use dpor_client::node_client::OwnerAuth;
use dpor_client::owner::{extract, flows};
use dpor_client::owner::edit;
use dpor_client::owner_state::OwnerState;
use alloy::signers::local::PrivateKeySigner;
use dpor_node::handler::Misbehavior;
use dpor_node::store::StoreConfig;
use rand::{Rng, SeedableRng};

#[path = "inproc/mod.rs"]
mod inproc;
use inproc::{node, shared_store, state, Node, CHAIN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_verifies_every_step_and_recovers_the_file_from_half_of_every_run() {
    let (n, beta) = (16u64, 64u32);
    let node = node(n, beta, Misbehavior::None).await;
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market: node.market, deal: 1 };
    let mut st = state(1, n, beta, node.market);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let file_len = 15 * beta as usize + 17; // a partial last block, one padding block
    let mut model: Vec<u8> = (0..file_len).map(|_| rng.gen()).collect();
    flows::upload(&node.client, &auth, &mut st, &model, None).await.unwrap();
    model.resize(n as usize * beta as usize, 0);

    // 2N + 5 writes: two C-rebuilds and every level on the way, each verified.
    let mut rebuilt = Vec::new();
    for w in 0..(2 * n + 5) {
        let i = rng.gen_range(0..n);
        let block: Vec<u8> = (0..beta).map(|_| rng.gen()).collect();
        let r = flows::write(&node.client, &auth, &mut st, i, &block).await.unwrap();
        model[(i * beta as u64) as usize..((i + 1) * beta as u64) as usize].copy_from_slice(&block);
        rebuilt.push(r.rebuilt);
        if w % 7 == 0 {
            let got = flows::read(&node.client, &st, i).await.unwrap();
            assert_eq!(got, block);
        }
    }
    assert_eq!(st.rebuild_count, 2);
    assert!(rebuilt.iter().any(|r| r == "H3") && rebuilt.iter().filter(|r| *r == "C-rebuild").count() == 2, "{rebuilt:?}");
    st.file_bytes = model.len() as u64; // the writes may have touched the padding
    let down = flows::download(&node.client, &st, None).await.unwrap();
    assert_eq!(down, model);
    let (ext, runs) = extract::extract(&node.client, &st, None).await.unwrap();
    assert_eq!(ext, model);
    assert!(runs.iter().all(|r| r.intact == r.size));

    // Zero just under half of every run on disk: extraction still recovers the file.
    let report = dpor_node::tamper::erase(&node.dir.path().join("store"), 1, 0.49, None, false, 7).unwrap();
    assert!(report.iter().all(|(_, erased, size)| *erased > 0 || *size < 4), "{report:?}");
    let (ext, runs) = extract::extract(&node.client, &st, None).await.unwrap();
    assert_eq!(ext, model, "extract after erasing just under half of every run");
    assert!(runs.iter().any(|r| r.intact < r.size));
    // A read of a U block still works (U is not erased) but a level past half is lost.
    let _ = dpor_node::tamper::erase(&node.dir.path().join("store"), 1, 0.75, None, true, 8).unwrap();
    let err = extract::extract(&node.client, &st, None).await.unwrap_err();
    assert!(format!("{err:#}").contains("cannot be recovered"), "{err:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_serves_wrong_blocks_fails_the_owners_spot_check() {
    let (n, beta) = (8u64, 64u32);
    let node = node(n, beta, Misbehavior::WrongBlock).await;
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market: node.market, deal: 1 };
    let mut st = state(1, n, beta, node.market);
    let err = flows::upload(&node.client, &auth, &mut st, &[9u8; 500], None).await.unwrap_err();
    assert!(format!("{err:#}").contains("spot-check"), "{err:#}");
    // The rejected upload stays rejected: no second, luckier spot-check later.
    assert!(!st.uploaded);
    let again = dpor_client::owner::recover::recover(&node.client, &auth, &mut st).await.unwrap_err();
    assert!(format!("{again:#}").contains("failed the owner's checks"), "{again:#}");
}

/// A node whose answer to a write fails the owner's spot-check (an honest server and a
/// cheating one over the same store): the owner keeps its previous state, refuses to
/// accept the answer later (no second, luckier spot-check), and still extracts the
/// previous file from the previous state's runs, which the node keeps because the
/// owner never confirmed the write (the consumed level would be collected otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_write_leaves_the_owner_on_its_previous_state_whose_runs_the_node_keeps() {
    use dpor_client::owner::recover;
    use dpor_client::owner_state::Pending;
    let (n, beta) = (8u64, 64u32);
    let node = shared_store(n, beta, &[Misbehavior::None, Misbehavior::WrongBlock]).await;
    let (honest, cheat) = (&node.clients[0], &node.clients[1]);
    let market = node.market;
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market, deal: 1 };
    let mut st = state(1, n, beta, market);
    st.cache_levels = 0; // every level's σ̃ lives on the node
    let mut model = vec![5u8; n as usize * beta as usize];
    flows::upload(honest, &auth, &mut st, &model, None).await.unwrap();
    // Write 1 builds level 0; write 2 (answered by the cheat) consumes it into level 1.
    flows::write(honest, &auth, &mut st, 2, &[7u8; 64]).await.unwrap();
    model[2 * 64..3 * 64].fill(7);
    let level0 = st.levels[0].clone().unwrap().run;
    let before = (st.root_u, st.write_count, st.levels.clone());
    let err = flows::write(cheat, &auth, &mut st, 3, &[8u8; 64]).await.unwrap_err();
    assert!(format!("{err:#}").contains("spot-check"), "{err:#}");
    assert!(matches!(st.pending, Some(Pending::Write { rejected: Some(_), .. })), "{:?}", st.pending);
    assert_eq!((st.root_u, st.write_count, st.levels.clone()), before, "the owner's state moved");
    // The node applied the write; the owner refuses its answer from now on, even from
    // the honest server (a fresh spot-check could pass by luck).
    assert_eq!(honest.status(1).await.unwrap().write_count, 2);
    let again = recover::recover(honest, &auth, &mut st).await.unwrap_err();
    assert!(format!("{again:#}").contains("failed the owner's checks"), "{again:#}");
    assert!(flows::write(honest, &auth, &mut st, 4, &[9u8; 64]).await.is_err());
    // The previous state's level 0 (consumed by the write) is still served: extract works.
    assert!(honest.sealed(1, level0, 0, 2).await.unwrap().iter().all(Option::is_some));
    let (ext, _) = extract::extract(honest, &st, None).await.unwrap();
    assert_eq!(ext, model);
}

/// Issue 11 #1–#2: batches of writes (random lengths, repeated indices, crossing two
/// C-rebuilds) against a plain array as the model of the file; the deferred checks
/// (recomputed small levels, spot-checked larger ones, σ̃ fetched for levels above the
/// checksum cache) pass on an honest node at every "checkpoint"; reads, download and
/// extraction give the model; single writes mix in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_of_writes_match_a_plain_array_and_pass_the_deferred_checks() {
    batches_case(StoreConfig::default()).await;
}

/// Issue 11 #3: the same over a node that defers every rebuild of 4 blocks or more to
/// its background builder (§6.1): answers name deferred runs with a zero root, the
/// owner learns the roots at the checkpoint (`Request::Built`), computes C's checksums
/// from its σ snapshot, and every check, read, download and extraction still holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_over_deferred_rebuilds_match_a_plain_array_and_pass_the_deferred_checks() {
    batches_case(StoreConfig { defer_from_blocks: Some(4), ..Default::default() }).await;
}

async fn batches_case(config: StoreConfig) {
    use dpor_client::owner::batch;
    let (n, beta) = (32u64, 64u32);
    let defers = config.defer_from_blocks.is_some();
    let node = inproc::node_with(PrivateKeySigner::random(), n, beta, Misbehavior::None, config).await;
    let mut zero_roots = 0;
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market: node.market, deal: 1 };
    let mut st = state(1, n, beta, node.market);
    st.block_cache_levels = 3; // levels 0..2 recomputed, 3.. spot-checked
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let mut model: Vec<u8> = (0..n as usize * beta as usize).map(|_| rng.gen()).collect();
    flows::upload(&node.client, &auth, &mut st, &model, None).await.unwrap();
    let (mut recomputed, mut spot) = (0, 0);
    for round in 0..10 {
        let len = rng.gen_range(1..=(n as usize + 7));
        let writes: Vec<(u64, Vec<u8>)> =
            (0..len).map(|_| (rng.gen_range(0..n / 2) * 2, (0..rng.gen_range(1..=beta)).map(|_| rng.gen()).collect())).collect();
        let r = batch::write_batch(&node.client, &auth, &mut st, &writes).await.unwrap();
        assert_eq!(r.count, len as u64);
        for (i, data) in &writes {
            let at = (*i * beta as u64) as usize;
            model[at..at + beta as usize].fill(0);
            model[at..at + data.len()].copy_from_slice(data);
        }
        assert_eq!(st.root_u, node.client.status(1).await.unwrap().root_u, "round {round}");
        assert!(st.runs().iter().any(|(e, _)| e.unchecked), "round {round}: the new runs wait for the checkpoint");
        zero_roots += st.runs().iter().filter(|(e, _)| e.root == alloy_primitives::B256::ZERO).count();
        // Without waiting: the runs the node has finished get their roots, and a build
        // is reported pending exactly while a run is still unnamed (never without
        // deferred builds).
        let (_, pending) = flows::builds_pending(&node.client, &mut st).await.unwrap();
        assert_eq!(pending, st.runs().iter().any(|(e, _)| e.root == alloy_primitives::B256::ZERO), "round {round}");
        assert!(defers || !pending, "round {round}");
        if round % 3 == 2 {
            let d = batch::verify_deferred(&node.client, &auth, &mut st).await.unwrap();
            recomputed += d.recomputed.len();
            spot += d.spot_checked.len();
            assert!(st.runs().iter().all(|(e, _)| !e.unchecked), "round {round}");
            // The digest the owner would sign is the node's state.
            let s = node.client.status(1).await.unwrap();
            assert_eq!((s.write_count, s.rebuild_count, s.root_u), (st.write_count, st.rebuild_count, st.root_u));
            assert_eq!(s.levels.iter().map(|l| l.2).collect::<Vec<_>>(), st.level_roots());
        }
        if round == 4 {
            let i = 5;
            let block: Vec<u8> = (0..beta).map(|_| rng.gen()).collect();
            flows::write(&node.client, &auth, &mut st, i, &block).await.unwrap();
            model[(i * beta as u64) as usize..((i + 1) * beta as u64) as usize].copy_from_slice(&block);
        }
        let i = rng.gen_range(0..n);
        assert_eq!(flows::read(&node.client, &st, i).await.unwrap(), model[(i * beta as u64) as usize..((i + 1) * beta as u64) as usize]);
    }
    assert!(st.rebuild_count >= 2, "the batches crossed C-rebuilds ({})", st.rebuild_count);
    assert!(recomputed > 0 && spot > 0, "both kinds of deferred check ran: {recomputed} recomputed, {spot} spot-checked");
    assert_eq!(zero_roots > 0, defers, "runs still being built are named with a zero root only when the node defers ({zero_roots})");
    batch::verify_deferred(&node.client, &auth, &mut st).await.unwrap();
    assert!(st.runs().iter().all(|(e, _)| e.root != alloy_primitives::B256::ZERO && !e.unchecked));
    assert!(st.c_snapshot.is_none());
    st.file_bytes = model.len() as u64;
    assert_eq!(flows::download(&node.client, &st, None).await.unwrap(), model);
    let (ext, _) = extract::extract(&node.client, &st, None).await.unwrap();
    assert_eq!(ext, model);
}

/// One step of [`mixed_writes_case`].
#[derive(Clone, Copy, Debug)]
enum Step {
    /// `dpor write I F`: one block, through the single-write flow.
    Single,
    /// `dpor write I1 F1 I2 F2 …`: a batch of this many writes.
    Batch(usize),
    /// `dpor checkpoint`'s checks of the runs batches built (the deferred checks).
    Check,
}

/// Runs `steps` on a fresh honest node (N = 8, so a batch of 9 or more writes always
/// crosses a C-rebuild) against a plain array as the model of the file; every
/// deferred check must pass (an honest node is never accused), and at the end the
/// node's state, a download and an extraction must equal the owner's and the model.
async fn mixed_writes_case(steps: &[Step], seed: u64) {
    use dpor_client::owner::batch;
    let (n, beta) = (8u64, 64u32);
    let node = node(n, beta, Misbehavior::None).await;
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market: node.market, deal: 1 };
    let mut st = state(1, n, beta, node.market);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut model: Vec<u8> = (0..n as usize * beta as usize).map(|_| rng.gen()).collect();
    flows::upload(&node.client, &auth, &mut st, &model, None).await.unwrap();
    let put = |model: &mut Vec<u8>, i: u64, data: &[u8]| {
        let at = (i * beta as u64) as usize;
        model[at..at + beta as usize].fill(0);
        model[at..at + data.len()].copy_from_slice(data);
    };
    for (k, step) in steps.iter().enumerate() {
        match *step {
            Step::Single => {
                let i = rng.gen_range(0..n);
                let data: Vec<u8> = (0..rng.gen_range(1..=beta)).map(|_| rng.gen()).collect();
                flows::write(&node.client, &auth, &mut st, i, &data).await.unwrap_or_else(|e| panic!("step {k} {step:?}: {e:#}"));
                put(&mut model, i, &data);
            }
            Step::Batch(len) => {
                let writes: Vec<(u64, Vec<u8>)> =
                    (0..len).map(|_| (rng.gen_range(0..n), (0..rng.gen_range(1..=beta)).map(|_| rng.gen()).collect())).collect();
                batch::write_batch(&node.client, &auth, &mut st, &writes).await.unwrap_or_else(|e| panic!("step {k} {step:?}: {e:#}"));
                for (i, data) in &writes {
                    put(&mut model, *i, data);
                }
            }
            Step::Check => {
                batch::verify_deferred(&node.client, &auth, &mut st)
                    .await
                    .unwrap_or_else(|e| panic!("step {k}: the owner accuses an honest node after {:?}: {e:#}", &steps[..k]));
                assert!(st.deferred_failure.is_none());
            }
        }
    }
    batch::verify_deferred(&node.client, &auth, &mut st)
        .await
        .unwrap_or_else(|e| panic!("the owner accuses an honest node after {steps:?}: {e:#}"));
    assert!(st.runs().iter().all(|(e, _)| !e.unchecked) && st.c_snapshot.is_none(), "{steps:?}");
    let s = node.client.status(1).await.unwrap();
    assert_eq!((s.write_count, s.rebuild_count, s.root_u), (st.write_count, st.rebuild_count, st.root_u), "{steps:?}");
    st.file_bytes = model.len() as u64;
    assert_eq!(flows::download(&node.client, &st, None).await.unwrap(), model, "{steps:?}");
    assert_eq!(extract::extract(&node.client, &st, None).await.unwrap().0, model, "{steps:?}");
}

/// A batch that crosses a C-rebuild leaves C unchecked until the checkpoint, whose
/// checksums then come from U's σ and the σ as of the C-rebuild of every block written
/// since. A single-block write in between must add its block to that snapshot too
/// (it once did not: the checkpoint found the honest node's C failing 128 of 128
/// samples, saved the failure and refused every later checkpoint). The sequence, its
/// neighbours (batch then batch, singles then batch, a batch then enough singles for
/// another C-rebuild), and random mixes of single writes, batches and checkpoints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_writes_and_batches_across_c_rebuilds_never_accuse_an_honest_node() {
    use Step::*;
    let sequences: [&[Step]; 6] = [
        &[Batch(11), Single, Check],
        &[Batch(9), Single, Single, Batch(2), Single, Check],
        &[Batch(11), Batch(3), Check],
        &[Single, Single, Batch(9), Check],
        &[Batch(10), Single, Single, Single, Single, Single, Single, Single, Check],
        &[Batch(12), Single, Check, Single, Batch(8), Single, Check],
    ];
    for (k, steps) in sequences.iter().enumerate() {
        mixed_writes_case(steps, k as u64).await;
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(21);
    for seed in 0..6 {
        let steps: Vec<Step> = (0..14)
            .map(|_| match rng.gen_range(0..6) {
                0..=2 => Single,
                3 | 4 => Batch(rng.gen_range(1..=20)),
                _ => Check,
            })
            .collect();
        mixed_writes_case(&steps, 100 + seed).await;
    }
}

/// Issue 11 #2: a node that commits a wrong coded block in a run that is consumed
/// before the next checkpoint (level 0 built by write 1, consumed by write 2) is
/// caught at the checkpoint: the corruption propagates into the level-3 run the digest
/// references (8 of its 16 coded blocks are wrong), whose deferred spot-check fails.
/// The owner accepted the batches (their roots were consistent), records the failure
/// and refuses every later check, and an honest node passes the same sequence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_corrupted_between_checkpoints_is_caught_at_the_checkpoint() {
    use dpor_client::owner::batch;
    use dpor_core::{RunId, RunTag};
    use dpor_node::store::CommitFault;
    for cheat in [false, true] {
        let (n, beta) = (64u64, 64u32);
        let node = shared_store(n, beta, &[Misbehavior::None]).await;
        let (client, store, market) = (&node.clients[0], &node.store, node.market);
        let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market, deal: 1 };
        let mut st = state(1, n, beta, market);
        st.block_cache_levels = 3;
        flows::upload(client, &auth, &mut st, &vec![3u8; (n * beta as u64) as usize], None).await.unwrap();
        if cheat {
            store.set_commit_fault(Some(CommitFault::at(RunId { tag: RunTag::level(0), built_at: 1 }, 0)));
        }
        // Batch 1 stores the (wrong) level 0; batch 2 consumes it into level 3.
        batch::write_batch(client, &auth, &mut st, &[(1, vec![1u8; 64])]).await.unwrap();
        let writes: Vec<(u64, Vec<u8>)> = (2..9u64).map(|i| (i, vec![i as u8; 64])).collect();
        batch::write_batch(client, &auth, &mut st, &writes).await.unwrap();
        assert_eq!(st.write_count, 8);
        assert_eq!(st.levels.iter().flatten().count(), 1, "only level 3 is filled");
        let level3 = st.levels[3].clone().unwrap();
        assert!(level3.unchecked);
        let verdict = batch::verify_deferred(client, &auth, &mut st).await;
        if !cheat {
            verdict.unwrap();
            assert!(!st.levels[3].as_ref().unwrap().unchecked);
            continue;
        }
        let err = verdict.unwrap_err();
        assert!(format!("{err:#}").contains("spot-check"), "{err:#}");
        assert!(st.deferred_failure.is_some());
        // No second, luckier check.
        let again = batch::verify_deferred(client, &auth, &mut st).await.unwrap_err();
        assert!(format!("{again:#}").contains("failed its deferred check"), "{again:#}");
    }
}

/// Issue 11 #1: a batch whose request is lost (the node drops it) or whose answer is
/// lost (the node applies it, the answer never arrives) is settled by the owner's
/// intent recovery: sent again with the same nonce, or learned with `Outcome` and
/// checked; either way the owner ends on the node's state and the file is the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_batch_or_a_lost_batch_answer_is_settled_by_the_intent_recovery() {
    use dpor_client::owner::machine::{self, Phase};
    use dpor_client::owner::{batch, recover};
    use dpor_client::owner_state::Pending;
    let (n, beta) = (16u64, 64u32);
    let node = shared_store(n, beta, &[Misbehavior::None, Misbehavior::DropWrites, Misbehavior::LoseWriteAnswers]).await;
    let (honest, drops, loses) = (&node.clients[0], &node.clients[1], &node.clients[2]);
    let market = node.market;
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market, deal: 1 };
    let sdir = tempfile::tempdir().unwrap();
    let mut st = state(1, n, beta, market);
    st.block_cache_levels = 2;
    st.path = Some(sdir.path().join("owner.json"));
    let mut model = vec![4u8; (n * beta as u64) as usize];
    flows::upload(honest, &auth, &mut st, &model, None).await.unwrap();
    let apply = |model: &mut Vec<u8>, writes: &[(u64, Vec<u8>)]| {
        for (i, d) in writes {
            model[(*i * beta as u64) as usize..((*i + 1) * beta as u64) as usize].copy_from_slice(d);
        }
    };
    for (round, client) in [drops, loses, drops, loses].into_iter().enumerate() {
        let writes: Vec<(u64, Vec<u8>)> = (0..5 + 3 * round as u64).map(|j| ((j * 3 + round as u64) % n, vec![(round * 10) as u8 + j as u8; 64])).collect();
        let before = honest.status(1).await.unwrap().write_count;
        let err = batch::write_batch(client, &auth, &mut st, &writes).await.unwrap_err();
        assert!(format!("{err:#}").contains("did not answer"), "{err:#}");
        assert!(matches!(st.pending, Some(Pending::WriteBatch { .. })));
        assert_eq!(machine::phase(&st), Phase::Intent);
        let applied = honest.status(1).await.unwrap().write_count != before;
        assert_eq!(applied, round % 2 == 1, "round {round}: the lose-answer node applies, the drop node does not");
        // No new request starts over an unsettled one (the flows never settle it
        // themselves), and refusing it leaves the saved intent as it was.
        let saved = std::fs::read(st.path.as_ref().unwrap()).unwrap();
        let refused = flows::write(honest, &auth, &mut st, 0, &[1u8; 64]).await.unwrap_err();
        assert!(format!("{refused:#}").contains("unfinished"), "{refused:#}");
        assert_eq!(std::fs::read(st.path.as_ref().unwrap()).unwrap(), saved);
        // A new process: only the files.
        let mut back = OwnerState::load(st.path.as_ref().unwrap()).unwrap();
        let notes = recover::recover(honest, &auth, &mut back).await.unwrap();
        assert!(notes.iter().any(|n| n.contains(if applied { "had been applied" } else { "sent again" })), "{notes:?}");
        assert!(back.pending.is_none());
        assert_eq!(machine::phase(&back), Phase::Idle);
        apply(&mut model, &writes);
        let s = honest.status(1).await.unwrap();
        assert_eq!((s.root_u, s.write_count, s.rebuild_count), (back.root_u, back.write_count, back.rebuild_count));
        batch::verify_deferred(honest, &auth, &mut back).await.unwrap();
        st = back;
    }
    st.file_bytes = model.len() as u64;
    assert_eq!(flows::download(honest, &st, None).await.unwrap(), model);
}

/// The race the kill campaign found: an owner killed mid-`UploadFinish` and restarted
/// at once asks `Outcome` while the node is still applying the finish, hears
/// `NotApplied`, sends the finish again and is refused ("already live"). The refusal
/// of that copy is not a refusal of the request: the owner asks once more, learns the
/// answer and settles it, instead of dropping the intent of an upload the node holds.
/// (The node's `stale-outcome-once` mode tells the one stale outcome at will.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_not_applied_outcome_does_not_make_the_owner_drop_an_applied_upload() {
    use dpor_client::owner::machine::{self, Phase};
    use dpor_client::owner::recover;
    use dpor_client::owner_state::Pending;
    let (n, beta) = (16u64, 64u32);
    let node = shared_store(n, beta, &[Misbehavior::None, Misbehavior::LoseWriteAnswers, Misbehavior::StaleOutcomeOnce]).await;
    let (honest, loses, stale) = (&node.clients[0], &node.clients[1], &node.clients[2]);
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market: node.market, deal: 1 };
    let sdir = tempfile::tempdir().unwrap();
    let mut st = state(1, n, beta, node.market);
    st.path = Some(sdir.path().join("owner.json"));
    let model: Vec<u8> = (0..(n * beta as u64) as usize).map(|i| (i % 251) as u8).collect();
    // The finish is applied and its answer lost.
    let err = flows::upload(loses, &auth, &mut st, &model, None).await.unwrap_err();
    assert!(format!("{err:#}").contains("did not answer"), "{err:#}");
    let Some(Pending::UploadFinish { nonce, .. }) = st.pending.clone() else { panic!("an upload finish pending: {:?}", st.pending) };
    let live = honest.status(1).await.unwrap();
    // A new process, whose first question meets the stale answer.
    let mut back = OwnerState::load(st.path.as_ref().unwrap()).unwrap();
    let notes = recover::recover(stale, &auth, &mut back).await.unwrap();
    assert!(back.pending.is_none(), "{notes:?}");
    assert_eq!(machine::phase(&back), Phase::Idle, "{notes:?}");
    assert!(back.uploaded, "the upload the node holds is the owner's: {notes:?}");
    assert_eq!(back.root_u, live.root_u);
    assert_eq!(flows::download(honest, &back, None).await.unwrap(), model);
    // The stale answer was told during the recovery (the mode is not a no-op): the node
    // now answers truthfully.
    let told = stale.outcome(1, nonce).await.unwrap();
    assert!(matches!(told, dpor_proto::messages::WireOutcome::Applied { .. }), "{told:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_range_writes_and_syncs_match_a_plain_byte_array_and_pass_the_checkpoint_checks() {
    let (n, beta) = (32u64, 64u32);
    let cap = (n * beta as u64) as usize;
    let node = node(n, beta, Misbehavior::None).await;
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market: node.market, deal: 1 };
    let mut st = state(1, n, beta, node.market);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let mut model: Vec<u8> = (0..700).map(|_| rng.gen()).collect();
    flows::upload(&node.client, &auth, &mut st, &model, None).await.unwrap();

    async fn check(node: &Node, auth: &OwnerAuth<'_>, st: &mut OwnerState, model: &[u8]) {
        assert_eq!(st.file_bytes, model.len() as u64);
        let got = flows::download(&node.client, st, None).await.unwrap();
        assert_eq!(got, model, "download differs from the model");
        // The runs the edits built pass the owner's deferred checks.
        dpor_client::owner::batch::verify_deferred(&node.client, auth, st).await.unwrap();
    }

    for round in 0..12 {
        if round % 3 == 2 {
            // A sync to a new version of the file: some bytes changed, longer or shorter.
            let new_len = rng.gen_range(1..=cap);
            let mut next = model.clone();
            next.resize(new_len, 0);
            for _ in 0..rng.gen_range(0..4) {
                let at = rng.gen_range(0..new_len);
                next[at] ^= 0xa5;
            }
            let old_blocks = model.len().div_ceil(beta as usize);
            let r = edit::sync(&node.client, &auth, &mut st, &next, None).await.unwrap();
            // Only blocks that differ are written: at most the changed ones, the cut or
            // grown tail and the edge block.
            assert!(r.blocks_written as usize <= 4 + old_blocks.abs_diff(new_len.div_ceil(beta as usize)) + 1, "{r:?}");
            model = next;
        } else {
            // A byte-range write anywhere, across block boundaries, maybe past the end.
            let offset = rng.gen_range(0..cap - 1);
            let len = rng.gen_range(1..=(cap - offset).min(300));
            let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            edit::write_range(&node.client, &auth, &mut st, offset as u64, &data, None).await.unwrap();
            if model.len() < offset + len {
                model.resize(offset + len, 0);
            }
            model[offset..offset + len].copy_from_slice(&data);
        }
        check(&node, &auth, &mut st, &model).await;
    }
    // A sync with nothing changed writes nothing.
    let r = edit::sync(&node.client, &auth, &mut st, &model.clone(), None).await.unwrap();
    assert_eq!(r.blocks_written, 0);
    // Past the deal's capacity: a clear error, nothing changed.
    let before = (st.root_u, st.file_bytes);
    let e = edit::write_range(&node.client, &auth, &mut st, cap as u64 - 1, &[1, 2], None).await.unwrap_err().to_string();
    assert!(e.contains("at most N·β"), "{e}");
    let e = edit::sync(&node.client, &auth, &mut st, &vec![7u8; cap + 1], None).await.unwrap_err().to_string();
    assert!(e.contains("at most N·β"), "{e}");
    assert_eq!((st.root_u, st.file_bytes), before);
    check(&node, &auth, &mut st, &model).await;
}

/// A download checks every block by its checksum: a node whose U file has one byte
/// changed (its leaves, and so rootU, untouched) is caught at that block, and a read
/// of that block fails as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_catches_a_changed_byte_in_the_nodes_u_blocks() {
    let (n, beta) = (16u64, 64u32);
    let node = node(n, beta, Misbehavior::None).await;
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market: node.market, deal: 1 };
    let mut st = state(1, n, beta, node.market);
    let file: Vec<u8> = (0..(n as usize * beta as usize - 9)).map(|i| (i * 31 % 251) as u8).collect();
    flows::upload(&node.client, &auth, &mut st, &file, None).await.unwrap();
    assert_eq!(flows::download(&node.client, &st, None).await.unwrap(), file);

    let u = node.dir.path().join("store").join("deals").join("1").join("u.blocks");
    let mut bytes = std::fs::read(&u).unwrap();
    bytes[11 * beta as usize + 7] ^= 0x40;
    std::fs::write(&u, &bytes).unwrap();
    let e = flows::download(&node.client, &st, None).await.unwrap_err().to_string();
    assert!(e.contains("block 11") && e.contains("checksum"), "{e}");
    assert!(flows::read(&node.client, &st, 11).await.is_err());
}

/// Resize (App. A.3) through lost requests and lost answers, against a plain array:
/// grow 8 → 32 (the answer lost: settled from the intent), writes into the new blocks
/// and a whole C-rebuild period at N' = 32 (never-written blocks keep the zero σ̃ and
/// still check), downloads and extraction, then shrink 32 → 4 (the request lost: sent
/// again), and the model cut to 4 blocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resizes_through_lost_requests_and_answers_match_a_plain_array() {
    use dpor_client::owner::{batch, recover, resize};
    use dpor_client::owner_state::Pending;
    let (n, beta) = (8u64, 64u32);
    let node = shared_store(n, beta, &[Misbehavior::None, Misbehavior::DropWrites, Misbehavior::LoseWriteAnswers]).await;
    let (honest, drops, loses) = (&node.clients[0], &node.clients[1], &node.clients[2]);
    let market = node.market;
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market, deal: 1 };
    let sdir = tempfile::tempdir().unwrap();
    let mut st = state(1, n, beta, market);
    st.path = Some(sdir.path().join("owner.json"));
    let b = beta as usize;
    let mut model: Vec<u8> = (0..n as usize * b).map(|i| (i % 251) as u8 + 1).collect();
    flows::upload(honest, &auth, &mut st, &model, None).await.unwrap();
    for i in [1u64, 5, 2] {
        let d = vec![0xA0 + i as u8; b];
        flows::write(honest, &auth, &mut st, i, &d).await.unwrap();
        model[i as usize * b..(i as usize + 1) * b].copy_from_slice(&d);
    }

    // Grow to 32 through a node that applies it and loses the answer.
    let err = resize::resize(loses, &auth, &mut st, 32).await.unwrap_err();
    assert!(format!("{err:#}").contains("did not answer"), "{err:#}");
    assert!(matches!(st.pending, Some(Pending::Resize { .. })));
    let mut back = OwnerState::load(st.path.as_ref().unwrap()).unwrap();
    let notes = recover::recover(honest, &auth, &mut back).await.unwrap();
    assert!(notes.iter().any(|n| n.contains("resize") && n.contains("had been applied")), "{notes:?}");
    st = back;
    assert_eq!((st.num_blocks, st.write_count), (32, 0));
    let s = honest.status(1).await.unwrap();
    assert_eq!((s.root_u, s.write_count, s.rebuild_count), (st.root_u, st.write_count, st.rebuild_count));
    model.resize(32 * b, 0);
    st.file_bytes = model.len() as u64;
    assert_eq!(flows::download(honest, &st, None).await.unwrap(), model, "after the growth");
    assert_eq!(extract::extract(honest, &st, None).await.unwrap().0, model, "extract after the growth");
    assert_eq!(flows::read(honest, &st, 20).await.unwrap(), vec![0u8; b], "a new block reads as zeros");

    // Writes into the new blocks (single and batched), then enough to cross a C-rebuild
    // at N' = 32 with blocks 28..32 never written (their σ̃ stays the zero one).
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    for k in 0..40u64 {
        let i = if k < 8 { 8 + k * 2 } else { rng.gen_range(0..28) };
        let d: Vec<u8> = (0..b).map(|_| rng.gen()).collect();
        if k % 3 == 0 {
            batch::write_batch(honest, &auth, &mut st, &[(i, d.clone())]).await.unwrap();
        } else {
            flows::write(honest, &auth, &mut st, i, &d).await.unwrap();
        }
        model[i as usize * b..(i as usize + 1) * b].copy_from_slice(&d);
    }
    batch::verify_deferred(honest, &auth, &mut st).await.unwrap();
    assert!(st.rebuild_count >= 2, "a C-rebuild at N' = 32 happened (rebuilds {})", st.rebuild_count);
    assert_eq!(flows::download(honest, &st, None).await.unwrap(), model, "after a C-rebuild at N'");
    assert_eq!(extract::extract(honest, &st, None).await.unwrap().0, model, "extract after a C-rebuild at N'");

    // Shrink to 4 through a node that drops the request: sent again by the recovery.
    let err = resize::resize(drops, &auth, &mut st, 4).await.unwrap_err();
    assert!(format!("{err:#}").contains("did not answer"), "{err:#}");
    let mut back = OwnerState::load(st.path.as_ref().unwrap()).unwrap();
    let notes = recover::recover(honest, &auth, &mut back).await.unwrap();
    assert!(notes.iter().any(|n| n.contains("resize") && n.contains("sent again")), "{notes:?}");
    st = back;
    model.truncate(4 * b);
    assert_eq!((st.num_blocks, st.file_bytes), (4, model.len() as u64));
    assert_eq!(flows::download(honest, &st, None).await.unwrap(), model, "after the shrink");
    assert_eq!(extract::extract(honest, &st, None).await.unwrap().0, model, "extract after the shrink");
    // The node refuses a resize to the same size or a size that is not a power of two.
    assert!(resize::resize(honest, &auth, &mut st, 4).await.is_err());
    assert!(resize::resize(honest, &auth, &mut st, 6).await.is_err());
    for i in 0..4u64 {
        let d = vec![i as u8 + 7; b];
        flows::write(honest, &auth, &mut st, i, &d).await.unwrap();
        model[i as usize * b..(i as usize + 1) * b].copy_from_slice(&d);
    }
    assert_eq!(flows::download(honest, &st, None).await.unwrap(), model, "after a C-rebuild at 4");
}

/// A cached level from `HASHED_LEVELS` up is checked at the checkpoint by its leaves
/// (the node's 32-byte leaves give the root; λ of them equal the owner's recomputed
/// blocks'), not hashed whole: an honest level 8 passes that way, and a level 8 whose
/// committed tree holds one wrong coded block is caught (λ covers all 512 positions)
/// and the owner signs nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_level_checked_by_its_leaves_passes_honest_and_catches_a_wrong_block() {
    use dpor_client::owner::batch;
    use dpor_core::{RunId, RunTag};
    use dpor_node::store::CommitFault;
    assert_eq!(batch::HASHED_LEVELS, 8);
    for cheat in [false, true] {
        let (n, beta) = (512u64, 64u32);
        let node = shared_store(n, beta, &[Misbehavior::None]).await;
        let (client, store, market) = (&node.clients[0], &node.store, node.market);
        let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market, deal: 1 };
        let mut st = state(1, n, beta, market);
        st.block_cache_levels = 9;
        st.lambda = 1024;
        flows::upload(client, &auth, &mut st, &vec![5u8; (n * beta as u64) as usize], None).await.unwrap();
        if cheat {
            store.set_commit_fault(Some(CommitFault::at(RunId { tag: RunTag::level(8), built_at: 256 }, 300)));
        }
        // 256 writes in one batch: the new state holds level 8 only (t = 256).
        let writes: Vec<(u64, Vec<u8>)> = (0..256u64).map(|w| ((w * 7) % n, vec![(w % 250) as u8 + 1; 64])).collect();
        batch::write_batch(client, &auth, &mut st, &writes).await.unwrap();
        assert_eq!(st.write_count, 256);
        assert!(st.levels[8].as_ref().unwrap().unchecked);
        let verdict = batch::verify_deferred(client, &auth, &mut st).await;
        if !cheat {
            let report = verdict.unwrap();
            assert_eq!(report.leaf_checked, vec!["H8@256".to_string()], "{report:?}");
            assert!(report.recomputed.is_empty() && report.spot_checked.is_empty(), "{report:?}");
            assert!(!st.levels[8].as_ref().unwrap().unchecked);
            continue;
        }
        let err = verdict.unwrap_err();
        assert!(format!("{err:#}").contains("position 300"), "{err:#}");
        assert!(st.deferred_failure.is_some());
    }
}

/// Issue 23 (review of the owner's sidecars): the block cache records each write before
/// its intent, so a request that never committed (a crash before its intent was
/// saved, a refusal) leaves a record under a write number a later request takes. A
/// single write taking that number must supersede it: a later checkpoint in a new
/// process (no in-memory copy of the levels) recomputes the batch-built level from the
/// cache and must pass on an honest node, never replay the stale block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_block_cache_record_never_makes_the_checkpoint_accuse_an_honest_node() {
    use dpor_client::owner::batch;
    let (n, beta) = (16u64, 64u32);
    let node = node(n, beta, Misbehavior::None).await;
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market: node.market, deal: 1 };
    let sdir = tempfile::tempdir().unwrap();
    let mut st = state(1, n, beta, node.market);
    st.block_cache_levels = 3;
    st.path = Some(sdir.path().join("owner.json"));
    flows::upload(&node.client, &auth, &mut st, &vec![3u8; (n * beta as u64) as usize], None).await.unwrap();
    // What a crash between the record and the intent leaves: block 5 as write 1.
    let total = st.total_writes();
    st.record_recent(total, [(5u64, vec![0xAA; beta as usize])]).unwrap();
    st.persist().unwrap();
    let mut st = OwnerState::load(st.path.as_ref().unwrap()).unwrap();
    // Write 1 is a single write of block 7; write 2, a batch, builds level 1 over both.
    flows::write(&node.client, &auth, &mut st, 7, &[0x77; 64]).await.unwrap();
    batch::write_batch(&node.client, &auth, &mut st, &[(9, vec![0x99; 64])]).await.unwrap();
    let mut back = OwnerState::load(st.path.as_ref().unwrap()).unwrap();
    assert!(back.local_levels.is_none(), "a new process has no copy of the levels");
    let report = batch::verify_deferred(&node.client, &auth, &mut back).await.unwrap();
    assert!(!report.recomputed.is_empty(), "the level was recomputed from the block cache: {report:?}");
    assert!(back.deferred_failure.is_none());
    // The checks were saved (once, after them): a new process finds every run checked.
    let again = OwnerState::load(back.path.as_ref().unwrap()).unwrap();
    assert!(again.runs().iter().all(|(e, _)| !e.unchecked), "the marks reached the state file");
    assert_eq!(again.levels, back.levels);
}

/// Issue 23: a batch whose commit's save is deferred (`write_batch_deferred`, one
/// `fdatasync` fewer per batch) leaves the batch's intent in the file until the next
/// save. An owner that dies then loses nothing, even after a co-sign has used the next
/// nonce (the node keeps the answer of its last write, batch, resize or upload finish):
/// the intent is settled from the node. The next batch's intent carries the commit, and
/// `write_many` saves at its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_batch_save_loses_nothing_when_the_owner_dies_before_the_next_save() {
    use dpor_client::owner::{batch, recover};
    use dpor_client::owner_state::Pending;
    let (n, beta) = (16u64, 64u32);
    let node = node(n, beta, Misbehavior::None).await;
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market: node.market, deal: 1 };
    let sdir = tempfile::tempdir().unwrap();
    let path = sdir.path().join("owner.json");
    let mut st = state(1, n, beta, node.market);
    st.block_cache_levels = 2;
    // Every level's σ cached: a commit stores no σ̃ with the node, so its save can wait.
    st.cache_levels = 4;
    st.path = Some(path.clone());
    let mut model = vec![3u8; (n * beta as u64) as usize];
    flows::upload(&node.client, &auth, &mut st, &model, None).await.unwrap();
    let writes = |round: u8, count: u64| -> Vec<(u64, Vec<u8>)> {
        (0..count).map(|j| ((j * 5 + round as u64) % n, vec![round.wrapping_mul(16).wrapping_add(j as u8); 64])).collect()
    };
    let apply = |model: &mut Vec<u8>, writes: &[(u64, Vec<u8>)]| {
        for (i, d) in writes {
            model[(*i * beta as u64) as usize..((*i + 1) * beta as u64) as usize].copy_from_slice(d);
        }
    };

    // A deferred batch: the owner's memory moves on, its file still holds the intent.
    let w1 = writes(1, 6);
    batch::write_batch_deferred(&node.client, &auth, &mut st, &w1).await.unwrap();
    apply(&mut model, &w1);
    assert!(st.has_unsaved_commit() && st.pending.is_none());
    let on_disk = OwnerState::load(&path).unwrap();
    assert!(matches!(on_disk.pending, Some(Pending::WriteBatch { .. })), "{:?}", on_disk.pending);
    assert_eq!(on_disk.total_writes(), st.total_writes() - 6);

    // A co-sign takes the next nonce before any save; then the owner dies. A new
    // process, from the files only, settles the batch with the node.
    let nonce = st.next_nonce();
    let digest = flows::next_digest(&st, 1);
    node.client.cosign(&auth, nonce, (&digest).into()).await.expect("the node co-signs the owner's state");
    let mut back = OwnerState::load(&path).unwrap();
    let notes = recover::recover(&node.client, &auth, &mut back).await.unwrap();
    assert!(notes.iter().any(|n| n.contains("had been applied")), "{notes:?}");
    assert_eq!((back.root_u, back.write_count, back.rebuild_count), (st.root_u, st.write_count, st.rebuild_count));
    assert!(back.pending.is_none() && !back.has_unsaved_commit());

    // Two more deferred batches: the second one's saved intent carries the first's commit.
    let mut st = back;
    let (w2, w3) = (writes(2, 7), writes(3, 5));
    batch::write_batch_deferred(&node.client, &auth, &mut st, &w2).await.unwrap();
    let after_w2 = (st.root_u, st.total_writes());
    batch::write_batch_deferred(&node.client, &auth, &mut st, &w3).await.unwrap();
    apply(&mut model, &w2);
    apply(&mut model, &w3);
    let on_disk = OwnerState::load(&path).unwrap();
    assert!(matches!(on_disk.pending, Some(Pending::WriteBatch { .. })));
    assert_eq!((on_disk.root_u, on_disk.total_writes()), after_w2, "the intent of the third batch over the state after the second");

    // `write_many` (its batches deferred) leaves nothing unsaved.
    let w4 = writes(4, 9);
    batch::write_many(&node.client, &auth, &mut st, &w4).await.unwrap();
    apply(&mut model, &w4);
    assert!(!st.has_unsaved_commit());
    let on_disk = OwnerState::load(&path).unwrap();
    assert!(on_disk.pending.is_none());
    assert_eq!((on_disk.root_u, on_disk.write_count, on_disk.rebuild_count), (st.root_u, st.write_count, st.rebuild_count));
    let mut st = on_disk;
    batch::verify_deferred(&node.client, &auth, &mut st).await.unwrap();
    st.file_bytes = model.len() as u64;
    assert_eq!(flows::download(&node.client, &st, None).await.unwrap(), model);
}
