//! The chain agent end to end against a real anvil (automine, 1-day epochs on the
//! market's global grid, time warped), with a fake `NodeRuns` over an in-memory state:
//! it registers, accepts the deal, proves epochs with whole blocks (payments
//! withdrawn), answers a dispute on a held sample (bond to the provider), does not
//! answer one on a block it lost (slashed), closes the finished deal; the proof of an
//! epoch uses the digest in force at its start even after the owner posts a newer one
//! (issue 9 finding 2), epochs before the first digest are not faults (finding 1), and
//! epochs across a resize are proven against each digest's own N (App. A.3).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloy_primitives::{B256, U256};
use dpor_chain::{sign_digest, DealState, Devnet, DisputeState, EpochStatus, Market, StateFixture};
use dpor_core::audit::RunTag;
use dpor_core::digest::Digest;
use dpor_core::RunId;
use dpor_node::chain_tasks::{AgentConfig, ChainAgent, NodeRuns, Registration};
use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const E18: u128 = 1_000_000_000_000_000_000;

#[derive(Default)]
struct Calls {
    digests: Vec<(u64, u64)>,
    opened: Vec<u64>,
    closed: Vec<u64>,
    /// (deal, epoch, digest version) pinned.
    epoch_pins: Vec<(u64, u64, u64)>,
    /// (deal, below epoch) released.
    released: Vec<(u64, u64)>,
    reads: usize,
}

/// The node's disk, in memory; blocks in `lost` come back with flipped bytes.
struct FakeRuns {
    fx: StateFixture,
    /// A second state whose runs are also on "disk" (a resized deal's), if any.
    fx2: Option<StateFixture>,
    lost: Mutex<HashSet<(RunTag, u64)>>,
    calls: Mutex<Calls>,
}

impl NodeRuns for FakeRuns {
    fn coded_block(&self, _deal: u64, run: RunId, position: u64) -> anyhow::Result<(Vec<u8>, Vec<B256>)> {
        self.calls.lock().unwrap().reads += 1;
        let (mut b, p) = self
            .fx
            .coded_block(run, position)
            .or_else(|| self.fx2.as_ref().and_then(|f| f.coded_block(run, position)))
            .ok_or_else(|| anyhow::anyhow!("no block {run} {position}"))?;
        if self.lost.lock().unwrap().contains(&(run.tag, position)) {
            b.iter_mut().for_each(|x| *x ^= 0x5a);
        }
        Ok((b, p))
    }
    fn digest_posted(&self, deal: u64, digest: &Digest) -> anyhow::Result<()> {
        self.calls.lock().unwrap().digests.push((deal, digest.version));
        Ok(())
    }
    fn dispute_opened(&self, _deal: u64, dispute: u64, _digest: &Digest) -> anyhow::Result<()> {
        self.calls.lock().unwrap().opened.push(dispute);
        Ok(())
    }
    fn dispute_closed(&self, _deal: u64, dispute: u64) -> anyhow::Result<()> {
        self.calls.lock().unwrap().closed.push(dispute);
        Ok(())
    }
    fn epoch_pinned(&self, deal: u64, epoch: u64, digest: &Digest) -> anyhow::Result<()> {
        self.calls.lock().unwrap().epoch_pins.push((deal, epoch, digest.version));
        Ok(())
    }
    fn epochs_released(&self, deal: u64, epoch: u64) -> anyhow::Result<()> {
        self.calls.lock().unwrap().released.push((deal, epoch));
        Ok(())
    }
}

fn fake_runs() -> Arc<FakeRuns> {
    Arc::new(FakeRuns {
        fx: StateFixture::new(256, 8, 3, 7).unwrap(),
        fx2: None,
        lost: Mutex::new(HashSet::new()),
        calls: Mutex::new(Calls::default()),
    })
}

fn agent_config(dev: &Devnet) -> AgentConfig {
    AgentConfig {
        poll_interval: Duration::from_millis(200),
        auto_accept: true,
        withdraw: true,
        register: Some(Registration {
            peer_id: vec![0, 0x24, 8, 1, 0x12, 0x20],
            multiaddrs: vec!["/ip4/127.0.0.1/tcp/4001".into()],
            price_per_block_epoch: E18,
            collateral_per_block: 6 * E18,
            capacity_blocks: 1 << 20,
            stake: 1000 * E18,
        }),
        from_block: dev.deploy_block(),
        close_finished: true,
        ..AgentConfig::default()
    }
}

/// Runs `agent.tick()` until `f` holds (at most `n` ticks): deterministic, no timing.
async fn tick_until<F, Fut>(agent: &mut ChainAgent, what: &str, n: usize, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..n {
        agent.tick().await;
        if f().await {
            return;
        }
    }
    panic!("not reached after {n} ticks: {what}");
}

/// A devnet (automine, 1-day epochs, dev seeds), the provider's tokens minted, an owner
/// with tokens, and a manual agent (ticked by the test) that registered and accepted a
/// 10-epoch deal. Returns (dev, owner, agent, runs, deal).
async fn manual_setup() -> (Devnet, Market, ChainAgent, Arc<FakeRuns>, u64) {
    manual_setup_with(fake_runs()).await
}

/// [`manual_setup`] with the node's disk `runs`.
async fn manual_setup_with(runs: Arc<FakeRuns>) -> (Devnet, Market, ChainAgent, Arc<FakeRuns>, u64) {
    let dev = Devnet::start(None).await.unwrap();
    let me = dev.key(1).address();
    let provider = dev.client(1).await.unwrap();
    provider.mint(me, U256::from(1_000_000 * E18)).await.unwrap();
    let owner = dev.client(2).await.unwrap();
    let o = owner.account().unwrap();
    owner.mint(o, U256::from(10_000 * E18)).await.unwrap();
    owner.approve_market(U256::from(10_000 * E18)).await.unwrap();
    let mut agent = ChainAgent::new(dev.client(1).await.unwrap(), runs.clone(), agent_config(&dev));
    agent.tick().await; // registers
    assert!(provider.get_provider(me).await.unwrap().registered);
    let deal = owner.open_deal(me, 8, 256, 4, 3, 10, E18, 6 * E18).await.unwrap();
    tick_until(&mut agent, "accepted", 3, || async { owner.get_deal(deal).await.unwrap().state == DealState::Active })
        .await;
    (dev, owner, agent, runs, deal)
}

async fn post(dev: &Devnet, owner: &Market, d: &Digest) -> B256 {
    let h = d.digest_hash(dev.chain_id(), dev.market());
    owner.post_digest(d, sign_digest(&dev.key(2), h).unwrap(), sign_digest(&dev.key(1), h).unwrap()).await.unwrap()
}

async fn warp_to_epoch(dev: &Devnet, owner: &Market, deal: u64, e: u64) {
    let w = owner.epoch_window(deal, e).await.unwrap();
    dev.warp_to(w.start).await.unwrap();
}

/// Issue 9 finding 2, performed: the owner posts a version bump of the same state
/// right after the epoch starts and before the provider's proof. The agent proves
/// against the digest in force at the epoch's start (pinned), and the proof passes.
#[tokio::test]
async fn proof_after_a_newer_digest_passes_against_the_digest_in_force() {
    let (dev, owner, mut agent, runs, deal) = manual_setup().await;
    let d1 = runs.fx.digest(deal, 1);
    post(&dev, &owner, &d1).await;
    agent.tick().await; // sees digest 1
    warp_to_epoch(&dev, &owner, deal, 0).await;
    // the attack: a bump posted inside epoch 0's window, before any proof
    let d2 = runs.fx.digest(deal, 2);
    let h2 = post(&dev, &owner, &d2).await;
    assert_eq!(owner.get_deal(deal).await.unwrap().digest_hash, h2, "v2 is the latest digest");
    tick_until(&mut agent, "epoch 0 proven", 4, || async {
        owner.epoch_status(deal, 0).await.unwrap() == EpochStatus::Proven
    })
    .await;
    {
        let calls = runs.calls.lock().unwrap();
        assert!(calls.epoch_pins.contains(&(deal, 0, 1)), "digest 1 pinned for epoch 0: {:?}", calls.epoch_pins);
        assert!(calls.digests.contains(&(deal, 2)));
    }
    // the proof was against version 1 (EpochProven's version)
    assert_eq!(owner.digest_in_force(deal, 0).await.unwrap().version, 1);
    // and epoch 1 is proven against version 2
    warp_to_epoch(&dev, &owner, deal, 1).await;
    tick_until(&mut agent, "epoch 1 proven", 4, || async {
        owner.epoch_status(deal, 1).await.unwrap() == EpochStatus::Proven
    })
    .await;
    assert!(runs.calls.lock().unwrap().epoch_pins.contains(&(deal, 1, 2)));
    assert!(runs.calls.lock().unwrap().released.iter().any(|&(d, e)| d == deal && e >= 1), "epoch 0's pin released");
    assert_eq!(owner.get_deal(deal).await.unwrap().failures, 0);
}

/// A resize (App. A.3) inside an epoch: the agent proves the epoch under way against
/// the pre-resize digest with the old N's sample positions, and the next epoch against
/// the resized digest with the new N's, from the runs of each state; no fault.
#[tokio::test]
async fn epochs_across_a_resize_are_proven_against_each_digests_own_n() {
    // The resized state: N = 16 after 17 writes (C@16, H0@17): names unlike the N = 8 state's.
    let (dev, owner, mut agent, runs, deal) = manual_setup_with(Arc::new(FakeRuns {
        fx: StateFixture::new(256, 8, 3, 7).unwrap(),
        fx2: Some(StateFixture::new(256, 16, 17, 9).unwrap()),
        lost: Mutex::new(HashSet::new()),
        calls: Mutex::new(Calls::default()),
    }))
    .await;
    let provider = dev.client(1).await.unwrap();
    let d1 = runs.fx.digest(deal, 1);
    post(&dev, &owner, &d1).await;
    agent.tick().await;
    warp_to_epoch(&dev, &owner, deal, 0).await;
    // Resize to 16 inside epoch 0, before the proof: same per-block terms.
    let d2 = runs.fx2.as_ref().unwrap().digest(deal, 2);
    assert_eq!((d2.numBlocks, d2.writeCount), (16, 1));
    let (price, collateral) = (16 * E18, 16 * 6 * E18);
    let r = dpor_core::digest::Resize { digest: d2.clone(), pricePerEpoch: price, collateral };
    let h = r.signing_hash(dev.chain_id(), dev.market());
    provider.ensure_allowance(U256::from(8 * 6 * E18)).await.unwrap();
    owner
        .resize_deal(&d2, price, collateral, sign_digest(&dev.key(2), h).unwrap(), sign_digest(&dev.key(1), h).unwrap())
        .await
        .unwrap();
    let after = owner.get_deal(deal).await.unwrap();
    assert_eq!((after.num_blocks, after.collateral, after.price_per_epoch), (16, collateral, price));
    assert_eq!(owner.digest_record(deal, 1).await.unwrap().num_blocks, 8);
    assert_eq!(owner.digest_record(deal, 2).await.unwrap().num_blocks, 16);
    tick_until(&mut agent, "epoch 0 proven", 4, || async { owner.epoch_status(deal, 0).await.unwrap() == EpochStatus::Proven }).await;
    assert!(runs.calls.lock().unwrap().epoch_pins.contains(&(deal, 0, 1)), "epoch 0 bound to the pre-resize digest");
    warp_to_epoch(&dev, &owner, deal, 1).await;
    tick_until(&mut agent, "epoch 1 proven", 4, || async { owner.epoch_status(deal, 1).await.unwrap() == EpochStatus::Proven }).await;
    assert!(runs.calls.lock().unwrap().epoch_pins.contains(&(deal, 1, 2)), "epoch 1 bound to the resized digest");
    assert_eq!(owner.get_deal(deal).await.unwrap().failures, 0);
}

/// Issue 9 finding 1: epochs that pass before the first digest are not faults; the
/// agent does not try to prove them, and proves the first epoch with a digest in force.
#[tokio::test]
async fn epochs_before_the_first_digest_are_not_faults() {
    let (dev, owner, mut agent, runs, deal) = manual_setup().await;
    warp_to_epoch(&dev, &owner, deal, 1).await;
    agent.tick().await;
    agent.tick().await;
    assert_eq!(runs.calls.lock().unwrap().reads, 0, "nothing to prove without a digest");
    let d1 = runs.fx.digest(deal, 1);
    post(&dev, &owner, &d1).await; // during epoch 1: in force from epoch 2
    warp_to_epoch(&dev, &owner, deal, 2).await;
    for e in 0..2 {
        owner.mark_missed(deal, e).await.unwrap();
    }
    assert_eq!(owner.get_deal(deal).await.unwrap().failures, 0, "no fault before the data existed");
    tick_until(&mut agent, "epoch 2 proven", 4, || async {
        owner.epoch_status(deal, 2).await.unwrap() == EpochStatus::Proven
    })
    .await;
    assert_eq!(owner.get_deal(deal).await.unwrap().failures, 0);
}

/// A node that lost part of every block it samples (here: every C block) cannot prove:
/// the agent sends nothing, the epoch is missed and counts a fault.
#[tokio::test]
async fn a_node_that_lost_blocks_does_not_prove_and_is_faulted() {
    let (dev, owner, mut agent, runs, deal) = manual_setup().await;
    let d1 = runs.fx.digest(deal, 1);
    post(&dev, &owner, &d1).await;
    {
        let mut lost = runs.lost.lock().unwrap();
        for (tag, size, _) in d1.runs() {
            for p in 0..size {
                lost.insert((tag, p));
            }
        }
    }
    warp_to_epoch(&dev, &owner, deal, 0).await;
    for _ in 0..4 {
        agent.tick().await;
    }
    assert!(runs.calls.lock().unwrap().reads > 0, "it tried");
    assert_eq!(owner.epoch_status(deal, 0).await.unwrap(), EpochStatus::None, "no proof sent");
    warp_to_epoch(&dev, &owner, deal, 1).await;
    owner.mark_missed(deal, 0).await.unwrap();
    assert_eq!(owner.get_deal(deal).await.unwrap().failures, 1);
}

/// Polls `f` every 200 ms until it returns true, failing after `secs`.
async fn until<F, Fut>(what: &str, secs: u64, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let end = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !f().await {
        assert!(tokio::time::Instant::now() < end, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_registers_accepts_proves_answers_disputes_and_closes() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("dpor_node=info"))
        .with_test_writer()
        .try_init();
    let dev = Devnet::start(None).await.unwrap();
    let provider_key = dev.key(1);
    let me = provider_key.address();
    let provider: Market = dev.client(1).await.unwrap(); // the test's own view of the provider
    let owner = dev.client(2).await.unwrap();
    let auditor = dev.client(3).await.unwrap();
    // the tokens are minted beforehand by whoever runs the node
    provider.mint(me, U256::from(1_000_000 * E18)).await.unwrap();
    let runs = fake_runs();
    let agent = ChainAgent::new(dev.client(1).await.unwrap(), runs.clone(), agent_config(&dev));
    let (stop, rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(agent.run(rx));

    // 1. registration
    until("the agent registers", 30, || async { provider.get_provider(me).await.unwrap().registered }).await;
    let p = provider.get_provider(me).await.unwrap();
    assert_eq!((p.stake, p.price_per_block_epoch), (U256::from(1000 * E18), E18));

    // 2. a 3-epoch deal: opened by the owner, accepted by the agent
    let o = owner.account().unwrap();
    owner.mint(o, U256::from(10_000 * E18)).await.unwrap();
    owner.approve_market(U256::from(10_000 * E18)).await.unwrap();
    let deal = owner.open_deal(me, 8, 256, 4, 2, 3, E18, 6 * E18).await.unwrap();
    until("the agent accepts", 30, || async { owner.get_deal(deal).await.unwrap().state == DealState::Active }).await;

    // 3. a dual-signed digest (the test co-signs with the provider's key, as the node would)
    let d = runs.fx.digest(deal, 1);
    post(&dev, &owner, &d).await;
    until("the agent sees the digest", 30, || async { runs.calls.lock().unwrap().digests.contains(&(deal, 1)) }).await;

    // 4. epochs 0 and 1 get proven (time warped to each start) and paid out
    let pay = owner.get_deal(deal).await.unwrap().price_per_epoch;
    let bal0 = provider.balance_of(me).await.unwrap();
    for e in 0..2 {
        warp_to_epoch(&dev, &owner, deal, e).await;
        until("epoch proven", 60, || async { owner.epoch_status(deal, e).await.unwrap() == EpochStatus::Proven }).await;
    }
    until("payments withdrawn", 30, || async {
        provider.owed(me).await.unwrap().is_zero() && provider.balance_of(me).await.unwrap() >= bal0 + U256::from(2 * pay)
    })
    .await;

    // 5. a dispute on a sample the provider holds: answered, bond to the provider
    auditor.mint(auditor.account().unwrap(), U256::from(1000 * E18)).await.unwrap();
    let bond = U256::from(auditor.dispute_bond().await.unwrap());
    let before = provider.balance_of(me).await.unwrap() + provider.owed(me).await.unwrap();
    let q1 = auditor.open_dispute(deal, 1, 1, B256::repeat_byte(1), 2, 3, 2).await.unwrap(); // level 1, pos 3, chunk 2
    until("dispute answered", 30, || async { auditor.get_dispute(q1).await.unwrap().state == DisputeState::Answered })
        .await;
    until("bond credited", 30, || async {
        provider.balance_of(me).await.unwrap() + provider.owed(me).await.unwrap() >= before + bond
    })
    .await;
    until("store released dispute 1", 60, || async { runs.calls.lock().unwrap().closed.contains(&q1) }).await;
    assert!(runs.calls.lock().unwrap().opened.contains(&q1));

    // 6. the node lost its data (C position 6 among it): it must not answer; after the
    //    deadline it is slashed. Every block is lost, not only the disputed one, so that
    //    epoch 2 (which the dispute's deadline warps into) cannot be proven either,
    //    whenever the agent's poll happens to run.
    {
        let mut lost = runs.lost.lock().unwrap();
        for (tag, size, _) in d.runs() {
            for p in 0..size {
                lost.insert((tag, p));
            }
        }
        assert!(lost.contains(&(RunTag::C, 6)));
    }
    let reads = runs.calls.lock().unwrap().reads; // no epoch is being proven now (epoch 1 done)
    let q2 = auditor.open_dispute(deal, 1, 1, B256::repeat_byte(2), 0, 6, 1).await.unwrap();
    until("the agent sees dispute 2", 30, || async { runs.calls.lock().unwrap().opened.contains(&q2) }).await;
    until("the agent tried to read the lost block", 60, || async { runs.calls.lock().unwrap().reads > reads }).await;
    let deadline = auditor.get_dispute(q2).await.unwrap().deadline;
    assert_eq!(auditor.get_dispute(q2).await.unwrap().state, DisputeState::Open, "no answer for a lost block");
    dev.warp_to(deadline + 1).await.unwrap();
    auditor.slash(q2).await.unwrap();
    assert_eq!(auditor.get_dispute(q2).await.unwrap().state, DisputeState::Slashed);
    until("store released dispute 2", 60, || async { runs.calls.lock().unwrap().closed.contains(&q2) }).await;
    assert_eq!(owner.get_deal(deal).await.unwrap().failures, 1, "the slash counted one fault");

    // 7. after the last deadline + grace, the agent closes the deal (epoch 2 was never
    //    proven: warped past; closeDeal faults it) and withdraws its collateral.
    let params = owner.params().await.unwrap();
    let info = owner.get_deal(deal).await.unwrap();
    dev.warp_to(params.dispute_period_end(&info)).await.unwrap();
    until("the agent closes the deal", 60, || async {
        matches!(owner.get_deal(deal).await.unwrap().state, DealState::Completed | DealState::Terminated)
    })
    .await;
    let closed = owner.get_deal(deal).await.unwrap();
    assert_eq!(closed.failures, 2, "epoch 2 unsettled with a digest in force: faulted at close");
    assert_eq!(closed.collateral, 0);

    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(30), task).await.unwrap().unwrap();
}
