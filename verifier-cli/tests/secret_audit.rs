//! The owner's compact secret audit (§5.5, `dpor audit --secret`) against a real node
//! in-process (store on disk, handler, libp2p over loopback; the chain replaced by a
//! fixed deal table, as in `owner_flows.rs`): an honest node passes at a fraction of
//! the public audit's bytes; a node that erased or corrupts sampled blocks fails; a
//! node that committed a wrong coded block inside its run root (so the public audit's
//! Merkle checks pass) and aggregates its stored blocks correctly fails too.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use alloy_primitives::{Address, B256};
use dpor_client::node_client::{NodeClient, OwnerAuth};
use dpor_client::owner::flows;
use dpor_client::owner::secret_audit::secret_audit;
use dpor_client::owner_state::{DealParams, OwnerState};
use dpor_core::audit::{audit_plan, verify_audit, RunResponse, SampleResponse};
use dpor_core::{BlockFormat, RunTag};
use dpor_node::handler::Misbehavior;
use dpor_node::store::CommitFault;
use dpor_proto::messages::{batch_len, WireRun};

#[path = "inproc/mod.rs"]
mod inproc;
use inproc::{shared_store as node, CHAIN};

fn state(n: u64, beta: u32, market: Address, lambda: u32, cache_levels: u32) -> OwnerState {
    let params = DealParams { deal: 1, chain_id: CHAIN, market, provider: Address::ZERO, num_blocks: n, block_bytes: beta, lambda };
    OwnerState::new(params, B256::repeat_byte(0x31), cache_levels, 0)
}

/// The public audit of the owner's current state (as `script/bench` runs it):
/// (passed, bytes on the wire).
async fn public_audit(node: &NodeClient, st: &OwnerState, lambda: u32) -> (bool, u64) {
    let format = BlockFormat::new(st.block_bytes as usize).unwrap();
    let digest = flows::next_digest(st, 1);
    let hash = digest.digest_hash(CHAIN, st.market);
    let seed = B256::repeat_byte(9);
    let (s0, r0) = node.traffic();
    let mut responses = Vec::new();
    for ((tag, positions), (id, _, _)) in audit_plan(&digest, hash, seed, lambda).iter().zip(digest.run_ids()) {
        let mut samples = Vec::new();
        for chunk in positions.chunks(batch_len(format.coded_block_bytes() as u64 + 1280) as usize) {
            for s in node.samples(1, WireRun::from(id), chunk.to_vec()).await.unwrap() {
                samples.push(SampleResponse { position: s.position, block: s.block.into_vec(), path: s.path });
            }
        }
        responses.push(RunResponse { tag: RunTag(tag.0), samples });
    }
    let (s1, r1) = node.traffic();
    (verify_audit(&digest, hash, seed, lambda, &format, &responses).passed(), (s1 - s0) + (r1 - r0))
}

async fn upload_and_write(node: &NodeClient, auth: &OwnerAuth<'_>, st: &mut OwnerState, writes: u64) {
    let beta = st.block_bytes as usize;
    let file: Vec<u8> = (0..st.num_blocks as usize * beta).map(|i| (i * 37 % 251) as u8).collect();
    flows::upload(node, auth, st, &file, None).await.unwrap();
    for w in 0..writes {
        flows::write(node, auth, st, (w * 5) % st.num_blocks, &vec![w as u8; beta]).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_honest_node_passes_at_a_fraction_of_the_public_audits_bytes() {
    let (n, beta, lambda) = (64u64, 1024u32, 16u32);
    let node = node(n, beta, &[Misbehavior::None]).await;
    let c = &node.clients[0];
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market: node.market, deal: 1 };
    // Levels 0..1 keep σ in the owner state, levels ≥ 2 and C have σ̃ on the node.
    let mut st = state(n, beta, node.market, lambda, 2);
    upload_and_write(c, &auth, &mut st, 13).await; // t = 13: levels 0, 2, 3 filled
    let report = secret_audit(c, &st, lambda, [7u8; 32]).await.unwrap();
    assert!(report.passed(), "{:?}", report.runs);
    let names: Vec<&str> = report.runs.iter().map(|r| r.run.as_str()).collect();
    assert_eq!(report.runs.len(), 4, "C and levels 0, 2, 3: {names:?}");
    assert!(report.runs[1].cached && !report.runs[0].cached && !report.runs[2].cached, "{:?}", report.runs);
    // Several fresh seeds pass too.
    for s in 1..4u8 {
        assert!(secret_audit(c, &st, lambda, [s; 32]).await.unwrap().passed());
    }
    // Bytes against the public audit of the same state, same λ.
    let (ok, public_bytes) = public_audit(c, &st, lambda).await;
    assert!(ok);
    let secret_bytes = report.bytes_sent + report.bytes_received;
    assert!(
        (secret_bytes as f64) < 0.2 * public_bytes as f64,
        "secret audit {secret_bytes} B vs public audit {public_bytes} B"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_erased_or_corrupts_sampled_blocks_fails() {
    let (n, beta, lambda) = (32u64, 256u32, 16u32);
    let node = node(n, beta, &[Misbehavior::None, Misbehavior::WrongBlock, Misbehavior::StaleLevel]).await;
    let (honest, wrong, stale) = (&node.clients[0], &node.clients[1], &node.clients[2]);
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market: node.market, deal: 1 };
    let mut st = state(n, beta, node.market, lambda, 0);
    upload_and_write(honest, &auth, &mut st, 7).await; // levels 0, 1, 2
    assert!(secret_audit(honest, &st, lambda, [1; 32]).await.unwrap().passed());

    // Serving flipped bits: every run fails.
    let r = secret_audit(wrong, &st, lambda, [1; 32]).await.unwrap();
    assert!(r.runs.iter().all(|v| v.fault.as_deref().is_some_and(|f| f.contains("does not match"))), "{:?}", r.runs);
    // Serving another level (or C) in place of the one asked: the levels fail.
    let r = secret_audit(stale, &st, lambda, [1; 32]).await.unwrap();
    assert!(r.runs.iter().filter(|v| v.run.starts_with('H')).all(|v| v.fault.is_some()), "{:?}", r.runs);

    // Erase 30% of every run on disk: sampling λ = 16 of C (64 blocks) misses every
    // erased block with probability 0.7^16 < 0.004 (this seed is fixed: deterministic).
    let erased = dpor_node::tamper::erase(&node.dir.path().join("store"), 1, 0.3, None, false, 3).unwrap();
    let r = secret_audit(honest, &st, lambda, [2; 32]).await.unwrap();
    assert!(!r.passed());
    assert!(erased[0].1 > 0 && r.runs[0].fault.is_some(), "C, 30% erased, λ = 16: {erased:?} {:?}", r.runs);
    // The levels are sampled whole: each with an erased block fails, the others pass.
    // (`erase` lists the runs by (tag, build time): the report's run order.)
    assert_eq!(erased.len(), r.runs.len());
    for ((file, zeroed, _), verdict) in erased.iter().zip(&r.runs) {
        assert_eq!(verdict.fault.is_some(), *zeroed > 0, "{file}: {zeroed} erased, {verdict:?}");
    }
    assert!(erased.iter().skip(1).any(|e| e.1 > 0) && erased.iter().any(|e| e.1 == 0), "{erased:?}");
}

/// The node commits one wrong coded block in C inside the root it returns (so every
/// Merkle path checks out: the public audit passes) and answers the secret audit by
/// aggregating exactly what it stores, with the right coefficients and the genuine σ̃.
/// The owner, which accepted C without a spot-check (λ = 0 at upload), catches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correct_aggregate_of_committed_wrong_blocks_fails() {
    let (n, beta) = (16u64, 128u32);
    let node = node(n, beta, &[Misbehavior::None]).await;
    let c = &node.clients[0];
    let auth = OwnerAuth { key: &node.owner, chain_id: CHAIN, market: node.market, deal: 1 };
    node.store.set_commit_fault(Some(CommitFault::one_per_run()));
    let mut st = state(n, beta, node.market, 0, 0); // no spot-checks: the owner trusts blindly
    let file = vec![0x5au8; (n * beta as u64) as usize];
    flows::upload(c, &auth, &mut st, &file, None).await.unwrap();
    node.store.set_commit_fault(None);
    // The public audit (Merkle paths against the committed root) cannot see it.
    let (ok, _) = public_audit(c, &st, 32).await;
    assert!(ok, "the public audit checks paths only");
    // λ ≥ 2N samples all of C: the wrong block is in the aggregate.
    let r = secret_audit(c, &st, 32, [4; 32]).await.unwrap();
    assert_eq!(r.runs.len(), 1);
    assert!(r.runs[0].fault.as_deref().is_some_and(|f| f.contains("does not match")), "{:?}", r.runs);
}
