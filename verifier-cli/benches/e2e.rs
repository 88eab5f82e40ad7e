//! End-to-end figures over loopback (`script/bench`): upload of a large file through
//! a real node (store on disk, libp2p server) by the owner's real flow, against the
//! disk's sequential write speed measured in the same run; bytes on the wire per
//! 4 KiB write against a plain Merkle tree's β + path; a public audit's bytes and
//! time, and the owner's secret audit (§5.5) of the same runs against it; disk bytes
//! per file byte. The chain is replaced by a fixed deal table (the
//! chain is not on these paths). `DPOR_BENCH_QUICK=1` runs a smaller file.
//! Prints Markdown to stdout (and to `$DPOR_BENCH_OUT` if set).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use alloy::signers::local::PrivateKeySigner;
use alloy_primitives::{Address, B256};
use async_trait::async_trait;
use dpor_cli::node_client::{NodeClient, OwnerAuth};
use dpor_cli::owner::flows;
use dpor_cli::owner_state::OwnerState;
use dpor_core::audit::{audit_plan, verify_audit, RunResponse, SampleResponse};
use dpor_core::{BlockFormat, RunTag};
use dpor_node::handler::{ChainDeal, DealLookup, NodeHandler};
use dpor_node::signing::ProviderSigner;
use dpor_node::store::{Store, StoreConfig};
use dpor_proto::messages::{batch_len, WireRun};
use dpor_proto::net::{self, NetConfig};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct FixedDeal(ChainDeal);

#[async_trait]
impl DealLookup for FixedDeal {
    async fn deal(&self, id: u64) -> anyhow::Result<Option<ChainDeal>> {
        Ok((id == 1).then(|| self.0.clone()))
    }
}

fn dir_bytes(p: &std::path::Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let m = match e.metadata() {
                Ok(m) => m,
                Err(_) => continue,
            };
            if m.is_dir() {
                total += dir_bytes(&e.path());
            } else {
                use std::os::unix::fs::MetadataExt;
                total += m.blocks() * 512;
            }
        }
    }
    total
}

/// Sequential write of `bytes` to a file in `dir`, fsync'd: MB/s.
fn disk_write_speed(dir: &std::path::Path, bytes: usize) -> f64 {
    let path = dir.join("seqwrite.bin");
    let buf = vec![0x5au8; 4 << 20];
    let t = Instant::now();
    let mut f = std::fs::File::create(&path).unwrap();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(buf.len());
        f.write_all(&buf[..n]).unwrap();
        left -= n;
    }
    f.sync_all().unwrap();
    let secs = t.elapsed().as_secs_f64();
    drop(f);
    let _ = std::fs::remove_file(&path);
    bytes as f64 / secs / 1e6
}

fn main() {
    let quick = std::env::var("DPOR_BENCH_QUICK").is_ok();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let report = rt.block_on(run(quick));
    print!("{report}");
    if let Ok(path) = std::env::var("DPOR_BENCH_OUT") {
        std::fs::write(path, &report).unwrap();
    }
}

async fn run(quick: bool) -> String {
    let beta = 4096usize;
    let file_bytes: usize = if quick { 16 << 20 } else { 256 << 20 };
    let n = (file_bytes / beta) as u64; // 2^16 for 256 MiB
    let format = BlockFormat::new(beta).unwrap();
    let tmp = tempfile::tempdir().unwrap();

    let disk_mb_s = disk_write_speed(tmp.path(), file_bytes);

    let owner_key = PrivateKeySigner::random();
    let provider_key = PrivateKeySigner::random();
    let market = Address::repeat_byte(0x42);
    let chain_id = 31337;
    let store = Arc::new(Store::open(&tmp.path().join("store"), StoreConfig { quota_bytes: None }).unwrap());
    let deal = ChainDeal { owner: owner_key.address(), provider: provider_key.address(), num_blocks: n, block_bytes: beta as u32, active: true };
    let signer = Arc::new(ProviderSigner::new(provider_key, chain_id, market));
    let handler = Arc::new(NodeHandler::new(store.clone(), Arc::new(FixedDeal(deal)), signer));
    let server = net::serve(net::load_or_create_keypair(&tmp.path().join("p2p.key")).unwrap(), "/ip4/127.0.0.1/tcp/0".parse().unwrap(), handler, NetConfig::default())
        .await
        .unwrap();
    let addr = server.listen_addrs()[0].clone().with(libp2p::multiaddr::Protocol::P2p(server.peer_id()));
    let node = NodeClient::connect(&addr.to_string(), Duration::from_secs(600)).await.unwrap();

    let mut state = OwnerState {
        deal: 1,
        chain_id,
        market,
        provider: Address::ZERO,
        seed: B256::repeat_byte(7),
        num_blocks: n,
        block_bytes: beta as u32,
        lambda: 128,
        file_bytes: 0,
        nonce: 0,
        uploaded: false,
        write_count: 0,
        rebuild_count: 0,
        root_u: B256::ZERO,
        c: None,
        levels: Vec::new(),
        digest_version: 0,
        cache_levels: 16,
        pending: None,
        path: None,
        stashed: None,
    };
    let auth = OwnerAuth { key: &owner_key, chain_id, market, deal: 1 };
    let file: Vec<u8> = (0..file_bytes).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();

    // Upload, end to end (owner checksums, network, node: U, C, trees, fsync; owner checks).
    let t = Instant::now();
    flows::upload(&node, &auth, &mut state, &file, None).await.unwrap();
    let upload_s = t.elapsed().as_secs_f64();
    let upload_mb_s = file_bytes as f64 / upload_s / 1e6;
    let (up_sent, up_recv) = node.traffic();

    // Breakdown, measured separately on the same data in this process.
    let keys = state.keys().unwrap();
    let blocks = flows::split_file(&file, beta, n).unwrap();
    let t = Instant::now();
    let mut records = Vec::with_capacity(n as usize * format.width());
    for (i, b) in blocks.iter().enumerate() {
        format.push_record(i as u64, b, &mut records).unwrap();
    }
    let c = dpor_core::code::c_rebuild(&records, n.trailing_zeros(), format.width()).unwrap();
    let coding_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let _ = keys.checksums(&records).unwrap();
    let checksum_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let coded: Vec<Vec<u8>> = c.chunks_exact(format.width()).map(|b| format.coded_to_bytes(b).unwrap()).collect();
    let _ = dpor_core::merkle::run_tree(&coded).unwrap().root();
    let _ = blocks.iter().map(|b| dpor_core::merkle::block_root(b)).count();
    let hashing_s = t.elapsed().as_secs_f64();
    drop((records, c, coded));
    let disk_after_upload = dir_bytes(&tmp.path().join("store"));

    // Writes: bytes on the wire per 4 KiB write, amortized over a window of writes.
    let writes: u64 = if quick { 64 } else { 256 };
    let (s0, r0) = node.traffic();
    let t = Instant::now();
    for w in 0..writes {
        let i = (w * 7919) % n;
        let block = vec![(w % 251) as u8; beta];
        flows::write(&node, &auth, &mut state, i, &block).await.unwrap();
    }
    let write_s = t.elapsed().as_secs_f64() / writes as f64;
    let (s1, r1) = node.traffic();
    let per_write = ((s1 - s0) + (r1 - r0)) as f64 / writes as f64;
    let merkle_baseline = (beta + 32 * n.trailing_zeros() as usize) as f64;

    // The same writes without the owner's spot-checks of each new run (what the paper's
    // Fig. 5–6 count; the spot-checks are the verification of the server's rebuild).
    let mut light = state.clone();
    light.lambda = 0;
    let (s0, r0) = node.traffic();
    for w in 0..writes {
        let i = (w * 104729 + 3) % n;
        let block = vec![(w % 13) as u8; beta];
        flows::write(&node, &auth, &mut light, i, &block).await.unwrap();
    }
    let (s1, r1) = node.traffic();
    let per_write_light = ((s1 - s0) + (r1 - r0)) as f64 / writes as f64;
    state = light;

    // A public audit of the current state at λ = 128 (seed: any 32 bytes).
    let digest = flows::next_digest(&state, 1);
    let hash = digest.digest_hash(chain_id, market);
    let seed = B256::repeat_byte(9);
    let (a0, b0) = node.traffic();
    let t = Instant::now();
    let plan = audit_plan(&digest, hash, seed, 128);
    let mut responses = Vec::new();
    for ((tag, positions), (id, _, _)) in plan.iter().zip(digest.run_ids()) {
        let mut samples = Vec::new();
        for chunk in positions.chunks(batch_len(format.coded_block_bytes() as u64 + 1280) as usize) {
            for s in node.samples(1, WireRun::from(id), chunk.to_vec()).await.unwrap() {
                samples.push(SampleResponse { position: s.position, block: s.block.into_vec(), path: s.path });
            }
        }
        responses.push(RunResponse { tag: RunTag(tag.0), samples });
    }
    let outcome = verify_audit(&digest, hash, seed, 128, &format, &responses);
    let audit_s = t.elapsed().as_secs_f64();
    let (a1, b1) = node.traffic();
    assert!(outcome.passed(), "audit of an honest node failed: {:?}", outcome.failures.first());

    // The owner's secret audit (§5.5) of the same runs at the same λ: one aggregated
    // block per run plus the σ̃ of the sampled positions (none for cached levels).
    let secret = dpor_cli::owner::secret_audit::secret_audit(&node, &state, 128, [5u8; 32]).await.unwrap();
    assert!(secret.passed(), "secret audit of an honest node failed: {:?}", secret.runs);
    let secret_bytes = (secret.bytes_sent + secret.bytes_received) as f64;
    let secret_fetched = secret.runs.iter().filter(|r| !r.cached).count();
    let disk_now = dir_bytes(&tmp.path().join("store"));
    server.shutdown().await;

    let mib = file_bytes >> 20;
    format!(
        "Measured {date} on this machine, one run; owner, node and network in one process over loopback TCP + Noise + Yamux.\n\n\
| figure | value | against |\n|---|---|---|\n\
| upload of {mib} MiB (n = {n}), end to end | {upload_mb_s:.1} MB/s ({upload_s:.1} s) | disk sequential write {disk_mb_s:.0} MB/s: **{r_up:.2}×** (target ≥ 0.5×) |\n\
| — C-rebuild (FFT) of the file | {coding_s:.2} s | {p_code:.0}% of the upload |\n\
| — owner checksums σ of every block | {checksum_s:.2} s | {p_sum:.0}% |\n\
| — keccak chunk trees (U blocks + C run tree) | {hashing_s:.2} s | {p_hash:.0}% |\n\
| — the rest (network, disk, σ̃ sealing, spot-checks) | {rest_s:.2} s | {p_rest:.0}% |\n\
| upload bytes on the wire | {up_mb:.1} MB | {r_wire:.3}× the file |\n\
| bytes on the wire per 4 KiB write, n = {n}, with the owner's spot-checks (λ = 128) | {per_write:.0} B | β + Merkle path = {merkle_baseline:.0} B: **{r_w:.2}×** |\n\
| the same without spot-checks (write, old path, σ̃ traffic) | {per_write_light:.0} B | **{r_wl:.3}×** (target ≤ 1.1×) |\n\
| time per write (with spot-checks) | {write_ms:.1} ms | |\n\
| public audit, λ = 128, {runs} runs ({checked} samples) | {audit_kb:.0} KB, {audit_ms:.0} ms | |\n\
| secret audit (owner, §5.5) of the same runs, λ = 128 ({secret_fetched} runs with σ̃ fetched, the others' σ cached) | {secret_kb:.1} KB, {secret_ms:.0} ms | public audit: **{r_sb:.3}× the bytes** (target ≤ 0.2×), {r_st:.2}× the time |\n\
| disk bytes per file byte after upload (U + C + trees + metadata) | {d_up:.2} | |\n\
| disk bytes per file byte after {w2} writes | {d_now:.2} | |\n",
        date = "the date of the run",
        r_up = upload_mb_s / disk_mb_s,
        p_code = 100.0 * coding_s / upload_s,
        p_sum = 100.0 * checksum_s / upload_s,
        p_hash = 100.0 * hashing_s / upload_s,
        rest_s = (upload_s - coding_s - checksum_s - hashing_s).max(0.0),
        p_rest = 100.0 * (upload_s - coding_s - checksum_s - hashing_s).max(0.0) / upload_s,
        up_mb = (up_sent + up_recv) as f64 / 1e6,
        r_wire = (up_sent + up_recv) as f64 / file_bytes as f64,
        r_w = per_write / merkle_baseline,
        r_wl = per_write_light / merkle_baseline,
        write_ms = write_s * 1e3,
        runs = digest.run_ids().len(),
        checked = outcome.checked,
        audit_kb = ((a1 - a0) + (b1 - b0)) as f64 / 1e3,
        audit_ms = audit_s * 1e3,
        secret_kb = secret_bytes / 1e3,
        secret_ms = secret.seconds * 1e3,
        r_sb = secret_bytes / ((a1 - a0) + (b1 - b0)) as f64,
        r_st = secret.seconds / audit_s,
        d_up = disk_after_upload as f64 / file_bytes as f64,
        d_now = disk_now as f64 / file_bytes as f64,
        w2 = 2 * writes,
    )
}
