//! An in-process node for the owner-side tests: a real store on disk, the real handler
//! and libp2p server over loopback, with the chain replaced by a fixed deal table.

#![allow(dead_code, clippy::unwrap_used)]

use alloy::signers::local::PrivateKeySigner;
use alloy_primitives::{Address, B256};
use async_trait::async_trait;
use dpor_client::node_client::NodeClient;
use dpor_client::owner_state::{DealParams, OwnerState};
use dpor_node::handler::{ChainDeal, DealLookup, Misbehavior, NodeHandler};
use dpor_node::signing::ProviderSigner;
use dpor_node::store::{Store, StoreConfig};
use dpor_proto::net::{self, NetConfig};
use std::sync::Arc;
use std::time::Duration;

pub const CHAIN: u64 = 31337;

/// A fixed deal table: deal i + 1 is entry i.
pub struct Deals(pub Vec<ChainDeal>);

#[async_trait]
impl DealLookup for Deals {
    async fn deal(&self, id: u64) -> anyhow::Result<Option<ChainDeal>> {
        Ok(self.0.get((id as usize).wrapping_sub(1)).cloned())
    }
}

pub struct Node {
    pub client: NodeClient,
    pub owner: PrivateKeySigner,
    pub market: Address,
    pub dir: tempfile::TempDir,
    _server: net::ServerHandle,
    _builder: Option<dpor_node::store::Builder>,
}

/// A node holding deals 1 and 2 of N = `n` blocks of `beta` bytes for a fresh owner key.
pub async fn node(n: u64, beta: u32, misbehavior: Misbehavior) -> Node {
    node_for(PrivateKeySigner::random(), n, beta, misbehavior).await
}

/// As [`node`], for the owner `owner` (several nodes, one owner: a dispersed file).
pub async fn node_for(owner: PrivateKeySigner, n: u64, beta: u32, misbehavior: Misbehavior) -> Node {
    node_with(owner, n, beta, misbehavior, StoreConfig::default()).await
}

/// As [`node_for`], with the store opened with `config`; when it defers rebuilds
/// (`defer_from_blocks`), a background builder runs as in `dpor-node`.
pub async fn node_with(owner: PrivateKeySigner, n: u64, beta: u32, misbehavior: Misbehavior, config: StoreConfig) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let provider = PrivateKeySigner::random();
    let market = Address::repeat_byte(0x42);
    let defers = config.defer_from_blocks.is_some();
    let store = Arc::new(Store::open(&dir.path().join("store"), config).unwrap());
    let builder = defers.then(|| dpor_node::store::Builder::start(&store));
    let deal = ChainDeal { owner: owner.address(), provider: provider.address(), num_blocks: n, block_bytes: beta, active: true };
    let handler = NodeHandler::new(store, Arc::new(Deals(vec![deal.clone(), deal])), Arc::new(ProviderSigner::new(provider, CHAIN, market)))
        .with_misbehavior(misbehavior);
    let server = net::serve(
        net::load_or_create_keypair(&dir.path().join("k")).unwrap(),
        "/ip4/127.0.0.1/tcp/0".parse().unwrap(),
        Arc::new(handler),
        NetConfig::default(),
    )
    .await
    .unwrap();
    let addr = server.listen_addrs()[0].clone().with(libp2p::multiaddr::Protocol::P2p(server.peer_id()));
    let client = NodeClient::connect(&addr.to_string(), Duration::from_secs(60)).await.unwrap();
    Node { client, owner, market, dir, _server: server, _builder: builder }
}

/// A fresh owner state for `deal` (N = `n`, β = `beta`, λ = 16).
pub fn state(deal: u64, n: u64, beta: u32, market: Address) -> OwnerState {
    let params = DealParams { deal, chain_id: CHAIN, market, provider: Address::ZERO, num_blocks: n, block_bytes: beta, lambda: 16 };
    // Checksum cache of 2 levels: levels ≥ 2 exercise the σ̃ fetch path.
    OwnerState::new(params, B256::repeat_byte(deal as u8), 2, 0)
}

/// One store (deal 1: N = `n` blocks of `beta` bytes, a fresh owner) served by one
/// handler per entry of `modes`, each on its own libp2p server: an honest view and
/// cheating ones over the same disk (a lost request, a lost answer, …).
pub struct SharedStore {
    /// One client per mode, in order.
    pub clients: Vec<NodeClient>,
    /// The store all handlers share (for commit faults).
    pub store: Arc<Store>,
    pub owner: PrivateKeySigner,
    pub market: Address,
    pub dir: tempfile::TempDir,
    _servers: Vec<net::ServerHandle>,
}

/// Starts a [`SharedStore`].
pub async fn shared_store(n: u64, beta: u32, modes: &[Misbehavior]) -> SharedStore {
    let dir = tempfile::tempdir().unwrap();
    let owner = PrivateKeySigner::random();
    let provider = PrivateKeySigner::random();
    let market = Address::repeat_byte(0x42);
    let store = Arc::new(Store::open(&dir.path().join("store"), StoreConfig::default()).unwrap());
    let deal = ChainDeal { owner: owner.address(), provider: provider.address(), num_blocks: n, block_bytes: beta, active: true };
    let signer = Arc::new(ProviderSigner::new(provider, CHAIN, market));
    let mut clients = Vec::new();
    let mut servers = Vec::new();
    for (i, m) in modes.iter().enumerate() {
        let handler = NodeHandler::new(store.clone(), Arc::new(Deals(vec![deal.clone()])), signer.clone()).with_misbehavior(*m);
        let server = net::serve(
            net::load_or_create_keypair(&dir.path().join(format!("k{i}"))).unwrap(),
            "/ip4/127.0.0.1/tcp/0".parse().unwrap(),
            Arc::new(handler),
            NetConfig::default(),
        )
        .await
        .unwrap();
        let addr = server.listen_addrs()[0].clone().with(libp2p::multiaddr::Protocol::P2p(server.peer_id()));
        clients.push(NodeClient::connect(&addr.to_string(), Duration::from_secs(60)).await.unwrap());
        servers.push(server);
    }
    SharedStore { clients, store, owner, market, dir, _servers: servers }
}
