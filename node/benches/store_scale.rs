//! A node holding many deals (issue 22, item 5), without a chain: builds a store of
//! `DPOR_SCALE_DEALS` deals (default 10,000; N = 16 blocks of β = 1 KiB each, uploaded
//! through the store's own upload path; at most 1,024 deals' U files open at once,
//! `StoreConfig::open_u_deals`), then measures
//! - opening the store again (what a node restart costs) and the resident memory it
//!   adds per deal (VmRSS before and after, /proc/self/status),
//! - one epoch's commitment work for all deals: each deal's K = 1 whole-block response
//!   read from disk and checked against its runs (`prove_epoch`, as the chain agent does),
//!   its response hash, and the commitment tree over all of them,
//! - keeping the responses (one sled batch, flushed).
//!
//! Prints one line `store deals=D create_seconds=… open_seconds=… rss_per_deal_bytes=…
//! epoch_build_seconds=… keep_seconds=… disk_bytes=…`. A benchmark, not a test: figures
//! vary with the machine's load. Run: `cargo bench -p dpor-node --bench store_scale`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloy_primitives::{Address, B256, U256};
use dpor_core::commitment::{response_hash, Commitment, Entry};
use dpor_core::digest::Digest;
use dpor_core::RunId;
use dpor_node::chain_tasks::prove::prove_epoch;
use dpor_node::chain_tasks::NodeRuns;
use dpor_node::store::{DealParams, Store, StoreConfig};
use std::sync::Arc;
use std::time::Instant;

const N: u64 = 16;
const BETA: usize = 1024;

struct Runs(Arc<Store>);

impl NodeRuns for Runs {
    fn coded_block(&self, deal: u64, run: RunId, position: u64) -> anyhow::Result<(Vec<u8>, Vec<B256>)> {
        self.0.coded(deal, run, &[position])?.pop().ok_or_else(|| anyhow::anyhow!("no block"))
    }
    fn digest_posted(&self, _: u64, _: &Digest) -> anyhow::Result<()> {
        Ok(())
    }
    fn dispute_opened(&self, _: u64, _: u64, _: &Digest) -> anyhow::Result<()> {
        Ok(())
    }
    fn dispute_closed(&self, _: u64, _: u64) -> anyhow::Result<()> {
        Ok(())
    }
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
        .map_or(0, |kb| kb * 1024)
}

fn dir_bytes(p: &std::path::Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let m = match e.metadata() {
                Ok(m) => m,
                Err(_) => continue,
            };
            n += if m.is_dir() { dir_bytes(&e.path()) } else { m.len() };
        }
    }
    n
}

fn digest_of(store: &Store, deal: u64) -> Digest {
    let v = store.view(deal).unwrap();
    Digest {
        dealId: U256::from(deal),
        version: 1,
        numBlocks: v.params.num_blocks,
        writeCount: v.write_count,
        rebuildCount: v.rebuild_count,
        rootU: v.root_u,
        rootC: v.c.1,
        levelRoots: v.levels.iter().map(|l| l.2).collect(),
    }
}

fn main() {
    let deals: u64 = std::env::var("DPOR_SCALE_DEALS").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let tmp = tempfile::tempdir().unwrap();
    let owner = Address::repeat_byte(2);
    let t = Instant::now();
    {
        let store = Store::open(tmp.path(), StoreConfig::default()).unwrap();
        for d in 1..=deals {
            let params = DealParams { deal: d, owner, num_blocks: N, block_bytes: BETA as u32 };
            store.upload_begin(params, 1).unwrap();
            let blocks: Vec<Vec<u8>> = (0..N).map(|i| vec![(d as u8) ^ (i as u8); BETA]).collect();
            store.upload_blocks(d, 2, 0, blocks.clone(), &vec![[7u8; 32]; N as usize]).unwrap();
            store.upload_finish(d, 3).unwrap();
        }
    }
    let create = t.elapsed().as_secs_f64();
    let rss0 = rss_bytes();
    let t = Instant::now();
    let store = Arc::new(Store::open(tmp.path(), StoreConfig::default()).unwrap());
    let open = t.elapsed().as_secs_f64();
    let rss1 = rss_bytes();
    let runs = Runs(store.clone());
    let digests: Vec<Digest> = (1..=deals).map(|d| digest_of(&store, d)).collect();
    let coded = dpor_core::BlockFormat::new(BETA).unwrap().coded_block_bytes();
    let t = Instant::now();
    let mut entries = Vec::with_capacity(deals as usize);
    for (i, dg) in digests.iter().enumerate() {
        let deal = i as u64 + 1;
        let dh = B256::from(U256::from(deal * 7919)); // any digest hash: the samples only need to be drawn
        let seed = dpor_core::audit::sample_seed(B256::repeat_byte(9), deal, 0);
        let proofs = prove_epoch(&runs, deal, dg, dh, seed, coded, 1).unwrap();
        let blocks: Vec<&[u8]> = proofs.iter().map(|p| p.codedBlock.as_ref()).collect();
        entries.push(Entry { deal_id: deal, epoch: 0, version: 1, response_hash: response_hash(seed, &blocks) });
    }
    let c = Commitment::new(&entries).unwrap();
    let build = t.elapsed().as_secs_f64();
    let kept: Vec<(u64, u64, Vec<u8>)> = entries.iter().map(|e| (e.deal_id, 0, vec![0u8; coded + 64 * 6])).collect();
    let t = Instant::now();
    store.put_epoch_responses(&kept).unwrap();
    let keep = t.elapsed().as_secs_f64();
    let per_deal = rss1.saturating_sub(rss0) / deals.max(1);
    println!(
        "store deals={deals} create_seconds={create:.1} open_seconds={open:.2} rss_per_deal_bytes={per_deal} epoch_build_seconds={build:.2} keep_seconds={keep:.2} disk_bytes={} root={}",
        dir_bytes(tmp.path()),
        c.root()
    );
}
