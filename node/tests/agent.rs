//! The chain agent end to end against a real anvil (0.5 s blocks, 10-block epochs),
//! with a fake `NodeRuns` over an in-memory state: it registers, accepts the deal,
//! proves epochs (payments withdrawn), answers a dispute on a held sample (bond to the
//! provider) and does not answer one on a block it lost, which then gets slashed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloy_primitives::{B256, U256};
use dpor_chain::{sign_digest, DealState, Devnet, DevnetOptions, DisputeState, EpochStatus, Market, StateFixture};
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
    reads: usize,
}

/// The node's disk, in memory; blocks in `lost` come back with flipped bytes.
struct FakeRuns {
    fx: StateFixture,
    lost: Mutex<HashSet<(RunTag, u64)>>,
    calls: Mutex<Calls>,
}

impl NodeRuns for FakeRuns {
    fn coded_block(&self, _deal: u64, run: RunId, position: u64) -> anyhow::Result<(Vec<u8>, Vec<B256>)> {
        self.calls.lock().unwrap().reads += 1;
        let (mut b, p) = self.fx.coded_block(run, position).ok_or_else(|| anyhow::anyhow!("no block {run} {position}"))?;
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
async fn agent_registers_accepts_proves_and_answers_disputes() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("dpor_node=info"))
        .with_test_writer()
        .try_init();
    let dev = Devnet::start_with(DevnetOptions {
        block_time: Some(Duration::from_millis(500)),
        epoch_blocks: Some(10),
        dispute_window: Some(20),
        ..Default::default()
    })
    .await
    .unwrap();
    let provider_key = dev.key(1);
    let me = provider_key.address();
    let provider: Market = dev.client(1).await.unwrap(); // the test's own view of the provider
    let owner = dev.client(2).await.unwrap();
    let auditor = dev.client(3).await.unwrap();
    // the tokens are minted beforehand by whoever runs the node
    provider.mint(me, U256::from(1_000_000 * E18)).await.unwrap();

    let runs = Arc::new(FakeRuns {
        fx: StateFixture::new(256, 8, 3, 7).unwrap(),
        lost: Mutex::new(HashSet::new()),
        calls: Mutex::new(Calls::default()),
    });
    let config = AgentConfig {
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
    };
    let agent = ChainAgent::new(dev.client(1).await.unwrap(), runs.clone(), config);
    let (stop, rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(agent.run(rx));

    // 1. registration
    until("the agent registers", 30, || async { provider.get_provider(me).await.unwrap().registered }).await;
    let p = provider.get_provider(me).await.unwrap();
    assert_eq!((p.stake, p.price_per_block_epoch), (U256::from(1000 * E18), E18));

    // 2. a deal: opened by the owner, accepted by the agent
    let o = owner.account().unwrap();
    owner.mint(o, U256::from(10_000 * E18)).await.unwrap();
    owner.approve_market(U256::from(10_000 * E18)).await.unwrap();
    let deal = owner.open_deal(me, 8, 256, 4, 2, 30, E18).await.unwrap();
    until("the agent accepts", 30, || async { owner.get_deal(deal).await.unwrap().state == DealState::Active }).await;

    // 3. a dual-signed digest (the test co-signs with the provider's key, as the node would)
    let d = runs.fx.digest(deal, 1);
    let h = d.digest_hash(dev.chain_id(), dev.market());
    owner.post_digest(&d, sign_digest(&dev.key(2), h).unwrap(), sign_digest(&provider_key, h).unwrap()).await.unwrap();
    until("the agent sees the digest", 30, || async { runs.calls.lock().unwrap().digests.contains(&(deal, 1)) }).await;

    // 4. epochs get proven and paid out
    let pay = owner.get_deal(deal).await.unwrap().price_per_epoch;
    let bal0 = provider.balance_of(me).await.unwrap();
    let proven = || async {
        let mut n = 0;
        for e in 0..30 {
            if owner.epoch_status(deal, e).await.unwrap() == EpochStatus::Proven {
                n += 1;
            }
        }
        n
    };
    until("two epochs proven", 90, || async { proven().await >= 2 }).await;
    until("payments withdrawn", 30, || async {
        provider.owed(me).await.unwrap().is_zero() && provider.balance_of(me).await.unwrap() >= bal0 + U256::from(2 * pay)
    })
    .await;

    // 5. a dispute on a sample the provider holds: answered, bond to the provider
    auditor.mint(auditor.account().unwrap(), U256::from(1000 * E18)).await.unwrap();
    let bond = U256::from(auditor.dispute_bond().await.unwrap());
    let before = provider.balance_of(me).await.unwrap() + provider.owed(me).await.unwrap();
    let q1 = auditor.open_dispute(deal, 0, 1, B256::repeat_byte(1), 2, 3, 2).await.unwrap(); // level 1, pos 3, chunk 2
    until("dispute answered", 30, || async { auditor.get_dispute(q1).await.unwrap().state == DisputeState::Answered })
        .await;
    until("bond credited", 30, || async {
        provider.balance_of(me).await.unwrap() + provider.owed(me).await.unwrap() >= before + bond
    })
    .await;
    until("store released dispute 1", 10, || async { runs.calls.lock().unwrap().closed.contains(&q1) }).await;
    assert!(runs.calls.lock().unwrap().opened.contains(&q1));

    // 6. the node lost C position 6: it must not answer; after the deadline it is slashed
    runs.lost.lock().unwrap().insert((RunTag::C, 6));
    let q2 = auditor.open_dispute(deal, 0, 1, B256::repeat_byte(2), 0, 6, 1).await.unwrap();
    until("the agent sees dispute 2", 30, || async { runs.calls.lock().unwrap().opened.contains(&q2) }).await;
    let reads = runs.calls.lock().unwrap().reads;
    until("the agent tried to read the lost block", 10, || async { runs.calls.lock().unwrap().reads > reads }).await;
    let deadline = auditor.get_dispute(q2).await.unwrap().deadline;
    let now = dev.block_number().await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(auditor.get_dispute(q2).await.unwrap().state, DisputeState::Open, "no answer for a lost block");
    dev.mine(deadline.saturating_sub(now) + 1).await.unwrap();
    auditor.slash(q2).await.unwrap();
    assert_eq!(auditor.get_dispute(q2).await.unwrap().state, DisputeState::Slashed);
    until("store released dispute 2", 10, || async { runs.calls.lock().unwrap().closed.contains(&q2) }).await;
    assert_eq!(owner.get_deal(deal).await.unwrap().failures, 1, "the slash counted one fault");

    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(30), task).await.unwrap().unwrap();
}
