//! Test driver for the crash test (`tests/crash.rs`): opens a store, uploads a
//! deterministic file if the deal is new or its upload unfinished, then writes
//! deterministic blocks forever (or up to a count), sometimes co-signing and posting a
//! digest of the current state. After each commit returns it prints, flushed,
//! `ack <total writes>` or `posted <version>`.
//!
//! Usage: `dpor-store-driver <dir> <seed> <num_blocks> <block_bytes> [max_writes]
//! [max_batch] [defer_from_blocks]`. With `max_batch` > 0 the writes go in batches
//! ([`Store::write_batch`]) of [`batch_at`] writes, and `ack` follows each batch.
//! With `defer_from_blocks` > 0 the store defers rebuilds of that many blocks or more
//! (`StoreConfig::defer_from_blocks`) and a background [`Builder`] builds them, as in
//! `dpor-node`; a kill then often lands inside a background build.
//! Contents are functions of (seed, write number) only ([`gen`]), so a test can
//! replay them on the reference state.

use alloy_primitives::{Address, U256};
use dpor_core::digest::Digest;
use dpor_node::store::{Builder, DealParams, Phase, Store, StoreConfig, StoreError};
use std::sync::Arc;
use std::io::Write;
use std::path::PathBuf;

/// The deal the driver uses.
const DEAL: u64 = 1;
/// Blocks per upload batch.
const BATCH: u64 = 16;

/// splitmix64.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `len` deterministic bytes from (seed, stream, n). The crash test has a copy.
fn gen(seed: u64, stream: u64, n: u64, len: usize) -> Vec<u8> {
    let base = mix(seed ^ mix(stream ^ mix(n)));
    (0..len as u64).flat_map(|j| mix(base ^ j.wrapping_mul(0x1000_0000_01B3)).to_le_bytes()).take(len).collect()
}

/// The length of the batch that starts at write `w` (1..=`max`). The crash test has a copy.
fn batch_at(seed: u64, w: u64, max: u64) -> u64 {
    1 + mix(seed ^ mix(8 ^ mix(w))) % max.max(1)
}

fn arr32(v: Vec<u8>) -> [u8; 32] {
    let mut a = [0u8; 32];
    a.iter_mut().zip(v).for_each(|(x, y)| *x = y);
    a
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        return Err("usage: dpor-store-driver <dir> <seed> <num_blocks> <block_bytes> [max_writes]".into());
    }
    let num = |i: usize| args[i].parse::<u64>().map_err(|e| format!("argument {i}: {e}"));
    let dir = PathBuf::from(&args[1]);
    let (seed, n, beta) = (num(2)?, num(3)?, num(4)? as usize);
    let max_writes = if args.len() > 5 { num(5)? } else { u64::MAX };
    let max_batch = if args.len() > 6 { num(6)? } else { 0 };
    let defer = if args.len() > 7 { num(7)? } else { 0 };
    let config = StoreConfig { defer_from_blocks: (defer > 0).then_some(defer), ..Default::default() };
    let store = Arc::new(Store::open(&dir, config).map_err(|e| e.to_string())?);
    let _builder = (defer > 0).then(|| Builder::start(&store));
    let e = |e: StoreError| e.to_string();
    let view = match store.view(DEAL) {
        Ok(v) => Some(v),
        Err(StoreError::UnknownDeal(_)) => None,
        Err(err) => return Err(err.to_string()),
    };
    if view.as_ref().is_none_or(|v| v.phase != Phase::Live) {
        let mut nonce = view.map(|v| v.last_nonce).unwrap_or(0) + 1;
        let params = DealParams { deal: DEAL, owner: Address::repeat_byte(7), num_blocks: n, block_bytes: beta as u32 };
        store.upload_begin(params, nonce).map_err(e)?;
        let mut start = 0;
        while start < n {
            let count = BATCH.min(n - start);
            let blocks: Vec<Vec<u8>> = (start..start + count).map(|i| gen(seed, 1, i, beta)).collect();
            let sealed: Vec<[u8; 32]> = (start..start + count).map(|i| arr32(gen(seed, 2, i, 32))).collect();
            nonce += 1;
            store.upload_blocks(DEAL, nonce, start, blocks, &sealed).map_err(e)?;
            start += count;
        }
        nonce += 1;
        store.upload_finish(DEAL, nonce).map_err(e)?;
        say("uploaded".into());
    }
    loop {
        let v = store.view(DEAL).map_err(e)?;
        let w = v.rebuild_count * n + v.write_count;
        if w >= max_writes {
            return Ok(());
        }
        let one = |w: u64| (mix(seed ^ mix(3 ^ mix(w))) % n, gen(seed, 4, w, beta), arr32(gen(seed, 5, w, 32)));
        let w = if max_batch == 0 {
            let (index, block, sealed) = one(w);
            store.write(DEAL, v.last_nonce + 1, index, block, sealed).map_err(e)?;
            w
        } else {
            let len = batch_at(seed, w, max_batch);
            store.write_batch(DEAL, v.last_nonce + 1, (w..w + len).map(one).collect()).map_err(e)?;
            w + len - 1
        };
        say(format!("ack {}", w + 1));
        if mix(seed ^ mix(6 ^ mix(w))).is_multiple_of(5) {
            // As an owner learns deferred runs' roots (`Request::Built`) before it signs.
            store.settle(DEAL).map_err(e)?;
            let v = store.view(DEAL).map_err(e)?;
            let version = v.cosigned.as_ref().map(|d| d.version).unwrap_or(0) + 1;
            let d = Digest {
                dealId: U256::from(DEAL),
                version,
                numBlocks: n,
                writeCount: v.write_count,
                rebuildCount: v.rebuild_count,
                rootU: v.root_u,
                rootC: v.c.1,
                levelRoots: v.levels.iter().map(|l| l.2).collect(),
            };
            store.check_cosign(DEAL, &d).map_err(e)?;
            store.set_posted(DEAL, &d).map_err(e)?;
            say(format!("posted {version}"));
        }
    }
}

fn main() {
    if let Err(err) = run() {
        eprintln!("dpor-store-driver: {err}");
        std::process::exit(1);
    }
}
