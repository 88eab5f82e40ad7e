//! The owner's flows against a real node in-process (store on disk, handler, libp2p
//! over loopback), with the chain replaced by a fixed deal table: upload, writes
//! through several H rebuilds and C-rebuilds (each verified by the owner), reads,
//! download and extraction checked against a plain array as the model of the file,
//! extraction after zeroing just under half of every run on disk, and a cheating
//! node caught by the owner's spot-check.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use alloy::signers::local::PrivateKeySigner;
use alloy_primitives::{Address, B256};
use async_trait::async_trait;
use dpor_cli::node_client::{NodeClient, OwnerAuth};
use dpor_cli::owner::flows;
use dpor_cli::owner_state::OwnerState;
use dpor_node::handler::{ChainDeal, DealLookup, Misbehavior, NodeHandler};
use dpor_node::signing::ProviderSigner;
use dpor_node::store::{Store, StoreConfig};
use dpor_proto::net::{self, NetConfig};
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Duration;

const CHAIN: u64 = 31337;

struct Deals(Vec<ChainDeal>);

#[async_trait]
impl DealLookup for Deals {
    async fn deal(&self, id: u64) -> anyhow::Result<Option<ChainDeal>> {
        Ok(self.0.get((id as usize).wrapping_sub(1)).cloned())
    }
}

struct Node {
    client: NodeClient,
    owner: PrivateKeySigner,
    market: Address,
    dir: tempfile::TempDir,
    _server: net::ServerHandle,
}

async fn node(n: u64, beta: u32, misbehavior: Misbehavior) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let owner = PrivateKeySigner::random();
    let provider = PrivateKeySigner::random();
    let market = Address::repeat_byte(0x42);
    let store = Arc::new(Store::open(&dir.path().join("store"), StoreConfig { quota_bytes: None }).unwrap());
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
    Node { client, owner, market, dir, _server: server }
}

fn state(deal: u64, n: u64, beta: u32, market: Address) -> OwnerState {
    OwnerState {
        deal,
        chain_id: CHAIN,
        market,
        provider: Address::ZERO,
        seed: B256::repeat_byte(deal as u8),
        num_blocks: n,
        block_bytes: beta,
        lambda: 16,
        file_bytes: 0,
        nonce: 0,
        uploaded: false,
        write_count: 0,
        rebuild_count: 0,
        root_u: B256::ZERO,
        c: None,
        levels: Vec::new(),
        digest_version: 0,
        cache_levels: 2, // levels ≥ 2 exercise the σ̃ fetch path
        pending: None,
        path: None,
        stashed: None,
    }
}

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
    let (ext, runs) = flows::extract(&node.client, &st, None).await.unwrap();
    assert_eq!(ext, model);
    assert!(runs.iter().all(|r| r.intact == r.size));

    // Zero just under half of every run on disk: extraction still recovers the file.
    let report = dpor_node::tamper::erase(&node.dir.path().join("store"), 1, 0.49, None, false, 7).unwrap();
    assert!(report.iter().all(|(_, erased, size)| *erased > 0 || *size < 4), "{report:?}");
    let (ext, runs) = flows::extract(&node.client, &st, None).await.unwrap();
    assert_eq!(ext, model, "extract after erasing just under half of every run");
    assert!(runs.iter().any(|r| r.intact < r.size));
    // A read of a U block still works (U is not erased) but a level past half is lost.
    let _ = dpor_node::tamper::erase(&node.dir.path().join("store"), 1, 0.75, None, true, 8).unwrap();
    let err = flows::extract(&node.client, &st, None).await.unwrap_err();
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
    let again = dpor_cli::owner::recover::recover(&node.client, &auth, &mut st).await.unwrap_err();
    assert!(format!("{again:#}").contains("failed the owner's checks"), "{again:#}");
}

/// A node whose answer to a write fails the owner's spot-check (an honest server and a
/// cheating one over the same store): the owner keeps its previous state, refuses to
/// accept the answer later (no second, luckier spot-check), and still extracts the
/// previous file from the previous state's runs, which the node keeps because the
/// owner never confirmed the write (the consumed level would be collected otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_write_leaves_the_owner_on_its_previous_state_whose_runs_the_node_keeps() {
    use dpor_cli::owner::recover;
    use dpor_cli::owner_state::Pending;
    let (n, beta) = (8u64, 64u32);
    let dir = tempfile::tempdir().unwrap();
    let owner = PrivateKeySigner::random();
    let provider = PrivateKeySigner::random();
    let market = Address::repeat_byte(0x42);
    let store = Arc::new(Store::open(&dir.path().join("store"), StoreConfig { quota_bytes: None }).unwrap());
    let deal = ChainDeal { owner: owner.address(), provider: provider.address(), num_blocks: n, block_bytes: beta, active: true };
    let signer = Arc::new(ProviderSigner::new(provider, CHAIN, market));
    let mut clients = Vec::new();
    let mut servers = Vec::new();
    for (i, m) in [Misbehavior::None, Misbehavior::WrongBlock].into_iter().enumerate() {
        let handler = NodeHandler::new(store.clone(), Arc::new(Deals(vec![deal.clone()])), signer.clone()).with_misbehavior(m);
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
    let (honest, cheat) = (&clients[0], &clients[1]);
    let auth = OwnerAuth { key: &owner, chain_id: CHAIN, market, deal: 1 };
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
    let (ext, _) = flows::extract(honest, &st, None).await.unwrap();
    assert_eq!(ext, model);
}
