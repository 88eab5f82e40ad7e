//! Shared setup of the chain tests: a devnet, a provider (account 1) registered, an
//! owner (account 2) with an Active deal over a [`StateFixture`].
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use dpor_chain::{sign_digest, Devnet, Market, StateFixture, U256};
use dpor_core::digest::Digest;

/// 1 token in wei.
pub const E18: u128 = 1_000_000_000_000_000_000;
/// β of the test deal (3 chunks per coded block: chunk paths of depth 2).
pub const BLOCK_BYTES: usize = 256;
/// N.
pub const NUM_BLOCKS: usize = 8;
/// K.
pub const SAMPLES: u8 = 3;

pub struct Setup {
    pub dev: Devnet,
    pub provider: Market,
    pub owner: Market,
    pub deal: u64,
    pub fixture: StateFixture,
}

pub fn wei(tokens: u128) -> U256 {
    U256::from(tokens * E18)
}

/// Registers account 1 as a provider with the given Market client (mint + approve first).
pub async fn register_provider(provider: &Market) {
    let me = provider.account().unwrap();
    provider.mint(me, wei(1_000_000)).await.unwrap();
    provider.approve_market(wei(1_000_000)).await.unwrap();
    provider
        .register(vec![0, 0x24, 8, 1], vec!["/ip4/127.0.0.1/tcp/4001".into()], E18, 6 * E18, 1 << 20, wei(1000))
        .await
        .unwrap();
}

/// Owner (account 2) mints, approves and opens an N = 8, β = 256, K = 3, 5-epoch deal.
pub async fn open_deal(owner: &Market, provider: dpor_chain::Address) -> u64 {
    let me = owner.account().unwrap();
    owner.mint(me, wei(10_000)).await.unwrap();
    owner.approve_market(wei(10_000)).await.unwrap();
    owner.open_deal(provider, NUM_BLOCKS as u64, BLOCK_BYTES as u32, 4, SAMPLES, 5, E18, 6 * E18).await.unwrap()
}

/// Devnet + registered provider + accepted deal + a state with 3 writes (C, H0, H1).
pub async fn setup() -> Setup {
    let dev = Devnet::start(None).await.unwrap();
    let provider = dev.client(1).await.unwrap();
    let owner = dev.client(2).await.unwrap();
    register_provider(&provider).await;
    let deal = open_deal(&owner, provider.account().unwrap()).await;
    provider.accept_deal(deal).await.unwrap();
    let fixture = StateFixture::new(BLOCK_BYTES, NUM_BLOCKS, 3, 1).unwrap();
    Setup { dev, provider, owner, deal, fixture }
}

impl Setup {
    /// Both signatures over `d` (owner = account 2, provider = account 1).
    pub fn sign(&self, d: &Digest) -> (dpor_chain::Bytes, dpor_chain::Bytes) {
        let h = d.digest_hash(self.dev.chain_id(), self.dev.market());
        (sign_digest(&self.dev.key(2), h).unwrap(), sign_digest(&self.dev.key(1), h).unwrap())
    }

    /// Warps chain time to the start of deal epoch `epoch` (one block at that timestamp).
    pub async fn warp_to_epoch(&self, epoch: u64) -> u64 {
        let w = self.owner.epoch_window(self.deal, epoch).await.unwrap();
        self.dev.warp_to(w.start).await.unwrap()
    }

    /// Posts the fixture's digest at `version`; returns it and its hash.
    pub async fn post(&self, version: u64) -> (Digest, dpor_chain::B256) {
        let d = self.fixture.digest(self.deal, version);
        let (o, p) = self.sign(&d);
        let h = self.owner.post_digest(&d, o, p).await.unwrap();
        (d, h)
    }
}
