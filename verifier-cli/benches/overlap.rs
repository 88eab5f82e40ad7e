//! How much of the batched writes' idle time overlapping two batches could fill
//! (issue 23, the "two batches in flight" plan of docs/PERFORMANCE.md): one node, two
//! deals of 256 MiB, their owners' real batched flows (batches of 512 random 4 KiB
//! writes, a checkpoint every 1024) over two loopback connections. Each round writes
//! deal 1 alone, deal 2 alone, then both at once (two batches in flight on one node,
//! each owner with one); the aggregate against the mean alone bounds what pipelining
//! one deal's batches could gain on the same cores. Prints the MB/s, the cores busy
//! and the CPU per write of each phase (`/proc/self/stat`). `DPOR_BENCH_OVERLAP_WRITES`
//! writes per deal and phase (default 4096, so that no C-rebuild falls in the rounds).
//! Not part of `script/bench`: `cargo bench -p dpor-cli --bench overlap`.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod util;

use alloy::signers::local::PrivateKeySigner;
use alloy_primitives::{Address, B256};
use async_trait::async_trait;
use dpor_client::node_client::{NodeClient, OwnerAuth};
use dpor_client::owner::{batch, flows};
use dpor_client::owner_state::{DealParams, OwnerState};
use dpor_node::handler::{ChainDeal, DealLookup, NodeHandler};
use dpor_node::signing::ProviderSigner;
use dpor_node::store::{Store, StoreConfig};
use dpor_proto::messages::WireDigest;
use dpor_proto::net::{self, NetConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};
use util::{cpu_seconds, mix};

/// Deals 1 and 2, both the same terms.
struct Deals(ChainDeal);

#[async_trait]
impl DealLookup for Deals {
    async fn deal(&self, id: u64) -> anyhow::Result<Option<ChainDeal>> {
        Ok((id == 1 || id == 2).then(|| self.0.clone()))
    }
}

/// One owner's batched writes: batches of 512, a checkpoint (deferred checks and the
/// node's co-signature, then "posted") every 1024 writes and at the end.
async fn phase(node: &NodeClient, auth: &OwnerAuth<'_>, state: &mut OwnerState, store: &Store, writes: &[(u64, Vec<u8>)], version: &mut u64) {
    let mut done = 0u64;
    for chunk in writes.chunks(512) {
        batch::write_batch_deferred(node, auth, state, chunk).await.unwrap();
        let before = done;
        done += chunk.len() as u64;
        if done / 1024 > before / 1024 || done == writes.len() as u64 {
            batch::verify_deferred(node, auth, state).await.unwrap();
            let digest = flows::next_digest(state, *version);
            *version += 1;
            let nonce = state.next_nonce();
            node.cosign(auth, nonce, WireDigest::from(&digest)).await.unwrap();
            store.set_posted(state.deal, &digest).unwrap();
        }
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let beta = 4096usize;
        let file_bytes = 256usize << 20;
        let n = (file_bytes / beta) as u64;
        let tmp = tempfile::tempdir().unwrap();
        let owner_key = PrivateKeySigner::random();
        let provider_key = PrivateKeySigner::random();
        let market = Address::repeat_byte(0x42);
        let chain_id = 31337;
        let store = Arc::new(Store::open(&tmp.path().join("store"), StoreConfig { defer_from_blocks: Some(dpor_node::config::DEFAULT_DEFER_FROM_BLOCKS), ..Default::default() }).unwrap());
        let _builder = dpor_node::store::Builder::start(&store);
        let deal = ChainDeal { owner: owner_key.address(), provider: provider_key.address(), num_blocks: n, block_bytes: beta as u32, active: true };
        let signer = Arc::new(ProviderSigner::new(provider_key, chain_id, market));
        let handler = Arc::new(NodeHandler::new(store.clone(), Arc::new(Deals(deal)), signer));
        let server = net::serve(net::load_or_create_keypair(&tmp.path().join("p2p.key")).unwrap(), "/ip4/127.0.0.1/tcp/0".parse().unwrap(), handler, NetConfig::default()).await.unwrap();
        let addr = server.listen_addrs()[0].clone().with(libp2p::multiaddr::Protocol::P2p(server.peer_id()));
        let file: Vec<u8> = (0..file_bytes).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        let mut states = Vec::new();
        let mut nodes = Vec::new();
        for d in [1u64, 2] {
            let node = NodeClient::connect(&addr.to_string(), Duration::from_secs(600)).await.unwrap();
            let params = DealParams { deal: d, chain_id, market, provider: Address::ZERO, num_blocks: n, block_bytes: beta as u32, lambda: 128 };
            let mut state = OwnerState::new(params, B256::repeat_byte(7), 16, 0);
            state.path = Some(tmp.path().join(format!("owner{d}.json")));
            let auth = OwnerAuth { key: &owner_key, chain_id, market, deal: d };
            flows::upload(&node, &auth, &mut state, &file, None).await.unwrap();
            state.block_cache_levels = dpor_client::owner_state::DEFAULT_BLOCK_CACHE_LEVELS;
            states.push(state);
            nodes.push(node);
        }
        let count: u64 = std::env::var("DPOR_BENCH_OVERLAP_WRITES").ok().and_then(|v| v.parse().ok()).unwrap_or(4096);
        let gen = |salt: u64| -> Vec<(u64, Vec<u8>)> {
            (0..count).map(|w| {
                let i = mix(salt ^ mix(w)) % n;
                let b: Vec<u8> = (0..beta as u64 / 8).flat_map(|j| mix(salt ^ mix(w ^ mix(j))).to_le_bytes()).collect();
                (i, b)
            }).collect()
        };
        let a1 = OwnerAuth { key: &owner_key, chain_id, market, deal: 1 };
        let a2 = OwnerAuth { key: &owner_key, chain_id, market, deal: 2 };
        let (mut s2, mut s1) = (states.pop().unwrap(), states.pop().unwrap());
        let (mut v1, mut v2) = (1u64, 1u64);
        let warm = gen(0x3a11);
        phase(&nodes[0], &a1, &mut s1, &store, &warm[..300], &mut v1).await;
        phase(&nodes[1], &a2, &mut s2, &store, &warm[..300], &mut v2).await;
        for round in 0..3u64 {
            let w1 = gen(0xb47c + round * 7);
            let t = Instant::now();
            let ca = cpu_seconds();
            phase(&nodes[0], &a1, &mut s1, &store, &w1, &mut v1).await;
            let alone1 = (count as f64 * beta as f64) / t.elapsed().as_secs_f64() / 1e6;
            println!("cores busy during deal 1 alone: {:.2}, CPU per write {:.0} us", (cpu_seconds() - ca) / t.elapsed().as_secs_f64(), (cpu_seconds() - ca) / count as f64 * 1e6);
            let w2 = gen(0xc47c + round * 7);
            let t = Instant::now();
            phase(&nodes[1], &a2, &mut s2, &store, &w2, &mut v2).await;
            let alone2 = (count as f64 * beta as f64) / t.elapsed().as_secs_f64() / 1e6;
            let (x1, x2) = (gen(0xd47c + round * 7), gen(0xe47c + round * 7));
            let t = Instant::now();
            let c0 = cpu_seconds();
            tokio::join!(phase(&nodes[0], &a1, &mut s1, &store, &x1, &mut v1), phase(&nodes[1], &a2, &mut s2, &store, &x2, &mut v2));
            let both = (2.0 * count as f64 * beta as f64) / t.elapsed().as_secs_f64() / 1e6;
            let cores = (cpu_seconds() - c0) / t.elapsed().as_secs_f64();
            println!("cores busy during both: {cores:.2}, CPU per write {:.0} us", (cpu_seconds() - c0) / (2 * count) as f64 * 1e6);
            println!("round {round}: deal 1 alone {alone1:.2} MB/s, deal 2 alone {alone2:.2} MB/s, both at once {both:.2} MB/s aggregate ({:.2}x the mean alone)", both / ((alone1 + alone2) / 2.0));
        }
        server.shutdown().await;
    });
}
