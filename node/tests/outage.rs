//! The chain agent and the second review's findings of issue 22, against a real anvil
//! (automine, 1-day epochs, time warped, the agent ticked by the test: no timing):
//! - capacity lock: it refuses a deal whose term is shorter than the market's
//!   `uploadSeconds`, and leaves a never-uploaded deal with `exitBeforeUpload` once its
//!   term is over, paid for the epochs the deal held;
//! - beacon outage: in beacon mode, an epoch whose round nobody relayed is marked missed
//!   by the agent after its deadline, and the market excuses it (no fault); an epoch whose
//!   round was relayed in time but that it could not prove is left alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloy_primitives::{B256, U256};
use dpor_beacon::LocalBeacon;
use dpor_chain::{sign_digest, DealState, Devnet, DevnetOptions, EpochStatus, Market, StateFixture};
use dpor_core::digest::Digest;
use dpor_core::RunId;
use dpor_node::chain_tasks::{AgentConfig, ChainAgent, NodeRuns, Registration};
use std::sync::Arc;
use std::time::Duration;

const E18: u128 = 1_000_000_000_000_000_000;
const DAY: u64 = 86_400;

/// A node whose disk holds nothing readable: it can never build a proof.
struct NoBlocks;

impl NodeRuns for NoBlocks {
    fn coded_block(&self, deal: u64, run: RunId, position: u64) -> anyhow::Result<(Vec<u8>, Vec<B256>)> {
        anyhow::bail!("deal {deal}: block {run} {position} unreadable")
    }
    fn digest_posted(&self, _deal: u64, _digest: &Digest) -> anyhow::Result<()> {
        Ok(())
    }
    fn dispute_opened(&self, _deal: u64, _dispute: u64, _digest: &Digest) -> anyhow::Result<()> {
        Ok(())
    }
    fn dispute_closed(&self, _deal: u64, _dispute: u64) -> anyhow::Result<()> {
        Ok(())
    }
}

fn agent_config(dev: &Devnet) -> AgentConfig {
    AgentConfig {
        poll_interval: Duration::from_millis(200),
        auto_accept: true,
        withdraw: false,
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

/// The provider's tokens minted, an owner with tokens and an allowance, and a manual
/// agent that registered. Returns (owner, agent).
async fn setup(dev: &Devnet) -> (Market, ChainAgent) {
    let me = dev.key(1).address();
    let provider = dev.client(1).await.unwrap();
    provider.mint(me, U256::from(1_000_000 * E18)).await.unwrap();
    let owner = dev.client(2).await.unwrap();
    let o = owner.account().unwrap();
    owner.mint(o, U256::from(10_000 * E18)).await.unwrap();
    owner.approve_market(U256::from(10_000 * E18)).await.unwrap();
    let mut agent = ChainAgent::new(dev.client(1).await.unwrap(), Arc::new(NoBlocks), agent_config(dev));
    agent.tick().await; // registers
    assert!(provider.get_provider(me).await.unwrap().registered);
    (owner, agent)
}

async fn ticks(agent: &mut ChainAgent, n: usize) {
    for _ in 0..n {
        agent.tick().await;
    }
}

async fn post(dev: &Devnet, owner: &Market, d: &Digest) {
    let h = d.digest_hash(dev.chain_id(), dev.market());
    owner.post_digest(d, sign_digest(&dev.key(2), h).unwrap(), sign_digest(&dev.key(1), h).unwrap()).await.unwrap();
}

/// Capacity lock: with uploadSeconds = 2 days and 1-day epochs, a 1-epoch deal is
/// refused (it stays Open), a 2-epoch deal is accepted; never uploaded, it is left by
/// the agent with exitBeforeUpload at the end of its term, the whole escrow paying the
/// provider for the epochs its capacity was held.
#[tokio::test]
async fn refuses_short_terms_and_is_paid_for_a_never_uploaded_deal() {
    let dev = Devnet::start_with(DevnetOptions { upload_seconds: Some(2 * DAY), ..Default::default() }).await.unwrap();
    let (owner, mut agent) = setup(&dev).await;
    let me = dev.key(1).address();
    let short = owner.open_deal(me, 8, 256, 4, 1, 1, E18, 6 * E18).await.unwrap();
    ticks(&mut agent, 3).await;
    assert_eq!(owner.get_deal(short).await.unwrap().state, DealState::Open, "1 day < uploadSeconds: refused");
    let deal = owner.open_deal(me, 8, 256, 4, 1, 2, E18, 6 * E18).await.unwrap();
    ticks(&mut agent, 2).await;
    let info = owner.get_deal(deal).await.unwrap();
    assert_eq!(info.state, DealState::Active, "2 days = uploadSeconds: accepted");
    assert_eq!(owner.get_deal(short).await.unwrap().state, DealState::Open);

    let params = owner.params().await.unwrap();
    dev.warp_to(params.last_deadline(&info) - 1).await.unwrap();
    ticks(&mut agent, 2).await;
    assert_eq!(owner.get_deal(deal).await.unwrap().state, DealState::Active, "not before the term is over");
    dev.warp_to(params.last_deadline(&info)).await.unwrap();
    ticks(&mut agent, 2).await;
    assert_eq!(owner.get_deal(deal).await.unwrap().state, DealState::Completed, "left with exitBeforeUpload");
    // accepted in global epoch g, left in g + 3: four epochs held, the two-epoch escrow pays for them
    assert_eq!(owner.owed(owner.account().unwrap()).await.unwrap(), U256::ZERO, "no escrow back to the owner");
    assert_eq!(owner.owed(me).await.unwrap(), U256::from(info.escrow + info.collateral));
}

/// Beacon outage: nobody relays epoch 0's round: the agent cannot prove it, marks it
/// missed after its deadline and the market excuses it (no fault, collateral intact).
/// Epoch 1's round is relayed on time but the node cannot read its blocks: the agent
/// does not mark it (that would be a fault now; closeDeal counts it at the end).
#[tokio::test]
async fn marks_its_seedless_epochs_so_they_are_excused() {
    let local = LocalBeacon::from_seed(b"dpor node outage test beacon 01").unwrap();
    let (dev, beacon) = Devnet::start_with_beacon(DevnetOptions::default(), local.public_key_words(), 3).await.unwrap();
    let (owner, mut agent) = setup(&dev).await;
    let me = dev.key(1).address();
    let deal = owner.open_deal(me, 8, 256, 4, 3, 10, E18, 6 * E18).await.unwrap();
    ticks(&mut agent, 2).await;
    assert_eq!(owner.get_deal(deal).await.unwrap().state, DealState::Active);
    let fx = StateFixture::new(256, 8, 3, 7).unwrap();
    post(&dev, &owner, &fx.digest(deal, 1)).await;
    let collateral = owner.get_deal(deal).await.unwrap().collateral;

    let w0 = owner.epoch_window(deal, 0).await.unwrap();
    dev.warp_to(w0.start + 10).await.unwrap();
    ticks(&mut agent, 2).await; // SeedUnavailable: nothing to prove with
    assert_eq!(owner.epoch_status(deal, 0).await.unwrap(), EpochStatus::None);
    let w1 = owner.epoch_window(deal, 1).await.unwrap();
    dev.warp_to(w1.start).await.unwrap(); // epoch 0's deadline
    ticks(&mut agent, 2).await;
    assert_eq!(owner.epoch_status(deal, 0).await.unwrap(), EpochStatus::Missed, "the agent marked epoch 0");
    let after = owner.get_deal(deal).await.unwrap();
    assert_eq!((after.failures, after.collateral), (0, collateral), "excused: no fault, no slash");
    assert_eq!(after.settled_with_digest, 1, "settled: closeDeal will not fault it");

    // epoch 1: its round relayed on time (at its emission), the node cannot prove
    let relay = dev.client(4).await.unwrap();
    let round = relay.beacon_round_at(beacon, w1.start).await.unwrap();
    let t = relay.beacon_round_time(beacon, round).await.unwrap();
    dev.warp_to(t).await.unwrap();
    relay.beacon_record(beacon, round, local.sign(round)).await.unwrap();
    assert_eq!(relay.beacon_recorded_at(beacon, round).await.unwrap(), Some(dev.timestamp().await.unwrap()));
    ticks(&mut agent, 2).await;
    let w2 = owner.epoch_window(deal, 2).await.unwrap();
    dev.warp_to(w2.start).await.unwrap();
    ticks(&mut agent, 2).await;
    assert_eq!(owner.epoch_status(deal, 1).await.unwrap(), EpochStatus::None, "not marked: its round came in time");
    assert_eq!(owner.get_deal(deal).await.unwrap().failures, 0);
}
