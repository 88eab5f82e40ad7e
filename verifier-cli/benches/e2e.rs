//! End-to-end figures over loopback (`script/bench`): upload of a large file through
//! a real node (store on disk, libp2p server) by the owner's real flow, against the
//! disk's sequential write speed measured in the same run; bytes on the wire per
//! 4 KiB write against a plain Merkle tree's β + path; a public audit's bytes and
//! time, and the owner's secret audit (§5.5) of the same runs against it; disk bytes
//! per file byte; random 4 KiB writes in batches with deferred checks and a checkpoint
//! every 1024 writes against a plain Merkle-tree store over the same transport (built
//! here: [`PlainMerkle`]), throughput and bytes on the wire. The chain is replaced by a fixed deal table (the
//! chain is not on these paths). `DPOR_BENCH_QUICK=1` runs a smaller file;
//! `DPOR_BENCH_ONLY=batched` stops after the batched writes (for a profiler),
//! `DPOR_BENCH_ONLY=period` after the whole C-rebuild period that follows them,
//! `DPOR_BENCH_ONLY=latency` after the single-write latency run that follows that,
//! `DPOR_BENCH_OWNER_FILE=0` keeps the owner's state in memory instead of in a file
//! saved at every step as the `dpor` command's owner keeps it,
//! `DPOR_BENCH_CHECKPOINT=wait` makes the owner's checkpoints wait for the node's
//! background builds instead of being postponed past them,
//! `DPOR_BENCH_PERF_CTL=CTL,ACK` (the FIFOs of `perf record --control fifo:CTL,ACK -D -1`)
//! profiles only the latency run's writes from the one before its C-rebuild, for
//! `DPOR_BENCH_PROFILE_WRITES` writes (64 if unset), printing each one's start and
//! time, and
//! `DPOR_BENCH_BATCH_WRITES`, `DPOR_BENCH_BATCH`, `DPOR_BENCH_BLOCK_CACHE`, `DPOR_BENCH_DEFER` set
//! their count, batch size, the owner's block cache levels and the node's `defer_from_blocks`.
//! Prints Markdown to stdout (and to `$DPOR_BENCH_OUT` if set).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod util;

use alloy::signers::local::PrivateKeySigner;
use alloy_primitives::{Address, B256};
use async_trait::async_trait;
use dpor_client::node_client::{NodeClient, OwnerAuth};
use dpor_client::owner::flows;
use dpor_client::owner_state::{DealParams, OwnerState};
use dpor_core::audit::{audit_plan, verify_audit, RunResponse, SampleResponse};
use dpor_core::{BlockFormat, RunTag};
use dpor_node::handler::{ChainDeal, DealLookup, NodeHandler};
use dpor_node::signing::ProviderSigner;
use dpor_node::store::{Store, StoreConfig};
use dpor_client::owner::batch;
use dpor_proto::messages::{batch_len, ErrorCode, OwnerOp, Request, Response, WireDigest, WireError, WireRun};
use dpor_proto::net::{self, NetConfig};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};
use util::{cpu_seconds, mix};

/// The baseline of the batched-write figures: a plain Merkle-tree block store over the
/// same transport (libp2p, `/dpor/1` messages): blocks in one file (pwrite), the tree's
/// leaves (keccak256 of each block) in another, one fsync of each per batch; the tree
/// in memory. It answers `UPaths` (leaf, zero, path) and an owner `WriteBatchByRoots`
/// whose roots are the leaves, as our owner signs its batches (no signature check, no
/// checksums, no coding; each block's leaf checked against the signed one): what
/// "write a block and verify its path" costs with nothing else.
struct PlainMerkle {
    inner: std::sync::Mutex<PlainInner>,
}

struct PlainInner {
    blocks: std::fs::File,
    leaves: std::fs::File,
    tree: dpor_core::merkle::MerkleTree,
    beta: u64,
}

impl PlainMerkle {
    fn new(dir: &std::path::Path, blocks: &[Vec<u8>]) -> Self {
        let beta = blocks[0].len() as u64;
        let mut bf = std::fs::File::create(dir.join("plain.blocks")).unwrap();
        let mut lf = std::fs::File::create(dir.join("plain.leaves")).unwrap();
        let leaves: Vec<B256> = blocks.iter().map(alloy_primitives::keccak256).collect();
        for (b, l) in blocks.iter().zip(&leaves) {
            bf.write_all(b).unwrap();
            lf.write_all(l.as_slice()).unwrap();
        }
        bf.sync_all().unwrap();
        lf.sync_all().unwrap();
        let tree = dpor_core::merkle::MerkleTree::new(leaves).unwrap();
        PlainMerkle { inner: std::sync::Mutex::new(PlainInner { blocks: bf, leaves: lf, tree, beta }) }
    }
}

#[async_trait]
impl net::Handler<Request, Response> for PlainMerkle {
    async fn handle(&self, _peer: libp2p::PeerId, request: Result<Request, dpor_proto::codec::FrameError>) -> Response {
        use std::os::unix::fs::FileExt;
        let fail = |m: String| Response::Error(WireError { code: ErrorCode::Internal, message: m });
        let Ok(request) = request else { return fail("bad frame".into()) };
        let mut g = self.inner.lock().unwrap();
        match request {
            Request::UPaths { indices, .. } => {
                let items = indices.iter().map(|&i| (i, g.tree.leaf(i).unwrap(), B256::ZERO, g.tree.path(i).unwrap())).collect();
                Response::UPaths { items }
            }
            Request::Owner(signed) => match OwnerOp::from_bytes(&signed.op) {
                Ok(OwnerOp::WriteBatchByRoots { writes }) => {
                    for (w, block) in writes.iter().zip(&signed.blocks) {
                        let leaf = alloy_primitives::keccak256(block);
                        assert_eq!(leaf, w.root, "the plain store's signed leaf");
                        g.blocks.write_all_at(block, w.index * g.beta).unwrap();
                        g.leaves.write_all_at(leaf.as_slice(), w.index * 32).unwrap();
                        g.tree.set_leaf(w.index, leaf).unwrap();
                    }
                    g.blocks.sync_data().unwrap();
                    g.leaves.sync_data().unwrap();
                    Response::WrittenBatch { count: writes.len() as u64, root_u: g.tree.root(), runs: vec![] }
                }
                _ => fail("not supported".into()),
            },
            _ => fail("not supported".into()),
        }
    }
}

/// Random 4 KiB writes through the plain Merkle store: the owner fetches the old
/// paths, checks them against its root, computes the new root, sends the batch and
/// compares the root. Returns the root after the writes.
async fn plain_writes(client: &NodeClient, auth: &OwnerAuth<'_>, mut root: B256, depth: u32, writes: &[(u64, Vec<u8>)], nonce: &mut u64) -> B256 {
    let distinct: Vec<u64> = writes.iter().map(|w| w.0).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    let old = client.u_paths(1, &distinct, depth).await.unwrap();
    let old: Vec<(u64, B256, Vec<B256>)> = distinct.iter().zip(old).map(|(&i, (leaf, _, path))| (i, leaf, path)).collect();
    let new: Vec<(u64, B256)> = writes.iter().map(|(i, b)| (*i, alloy_primitives::keccak256(b))).collect();
    let want = batch::new_root_from_paths(&root, depth, &old, &new).unwrap();
    *nonce += 1;
    let wire = writes.iter().zip(&new).map(|((i, b), (_, leaf))| (*i, b.clone(), *leaf, B256::ZERO)).collect();
    let got = client.write_batch_by_roots(auth, *nonce, wire).await.unwrap();
    assert_eq!(got.root_u, want, "the plain store's root");
    root = want;
    root
}

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

/// Writes an owner goes on with past a due checkpoint while the node builds a run in
/// the background; then the checkpoint waits (a provider reporting builds pending
/// forever cannot keep the owner's digest old). A C-rebuild's build took 5–9 s here,
/// 15 000–25 000 batched writes.
const MAX_POSTPONED: u64 = 32_768;

/// Whether a checkpoint now would wait for the node's background builds (the owner
/// then postpones it to a later batch; `flows::builds_pending`). Never with
/// `DPOR_BENCH_CHECKPOINT=wait` (an owner that waits, for comparison).
async fn checkpoint_waits(node: &NodeClient, state: &mut OwnerState) -> bool {
    std::env::var("DPOR_BENCH_CHECKPOINT").as_deref() != Ok("wait") && flows::builds_pending(node, state).await.unwrap().1
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

    // The disk baseline: the median of three writes (one alone varied 366–1808 MB/s
    // between runs on one host: page cache and device write-back).
    let mut disk_runs: Vec<f64> = (0..3).map(|_| disk_write_speed(tmp.path(), file_bytes)).collect();
    disk_runs.sort_by(f64::total_cmp);
    let disk_mb_s = disk_runs[1];
    let disk_runs = disk_runs.iter().map(|d| format!("{d:.0}")).collect::<Vec<_>>().join(", ");

    let owner_key = PrivateKeySigner::random();
    let provider_key = PrivateKeySigner::random();
    let market = Address::repeat_byte(0x42);
    let chain_id = 31337;
    // The node as `dpor-node` runs it: rebuilds of ≥ DEFAULT_DEFER_FROM_BLOCKS blocks
    // deferred to a background builder (§6.1, issue 11 #3).
    let defer_from = std::env::var("DPOR_BENCH_DEFER").ok().and_then(|v| v.parse().ok()).unwrap_or(dpor_node::config::DEFAULT_DEFER_FROM_BLOCKS);
    let store = Arc::new(
        Store::open(&tmp.path().join("store"), StoreConfig { defer_from_blocks: Some(defer_from), ..Default::default() }).unwrap(),
    );
    let builder = dpor_node::store::Builder::start(&store);
    let deal = ChainDeal { owner: owner_key.address(), provider: provider_key.address(), num_blocks: n, block_bytes: beta as u32, active: true };
    let signer = Arc::new(ProviderSigner::new(provider_key, chain_id, market));
    let handler = Arc::new(NodeHandler::new(store.clone(), Arc::new(FixedDeal(deal)), signer));
    let server = net::serve(net::load_or_create_keypair(&tmp.path().join("p2p.key")).unwrap(), "/ip4/127.0.0.1/tcp/0".parse().unwrap(), handler, NetConfig::default())
        .await
        .unwrap();
    let addr = server.listen_addrs()[0].clone().with(libp2p::multiaddr::Protocol::P2p(server.peer_id()));
    let node = NodeClient::connect(&addr.to_string(), Duration::from_secs(600)).await.unwrap();

    let params = DealParams { deal: 1, chain_id, market, provider: Address::ZERO, num_blocks: n, block_bytes: beta as u32, lambda: 128 };
    let mut state = OwnerState::new(params, B256::repeat_byte(7), 16, 0);
    // The owner's state in a file, saved at every step, as the `dpor` command's owner
    // keeps it (its saves are a quarter of the batched phase: docs/PERFORMANCE.md);
    // `DPOR_BENCH_OWNER_FILE=0` keeps it in memory, as the bench did before 2026-11-28.
    if std::env::var("DPOR_BENCH_OWNER_FILE").as_deref() != Ok("0") {
        state.path = Some(tmp.path().join("owner.json"));
    }
    let auth = OwnerAuth { key: &owner_key, chain_id, market, deal: 1 };
    let file: Vec<u8> = (0..file_bytes).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();

    // Upload, end to end (owner checksums, network, node: U, C, trees, fsync; owner checks).
    let trees_before_upload = dpor_core::merkle::chunk_tree_counts();
    let t = Instant::now();
    let upload_report = flows::upload(&node, &auth, &mut state, &file, None).await.unwrap();
    let upload_s = t.elapsed().as_secs_f64();
    let trees_after_upload = dpor_core::merkle::chunk_tree_counts();
    let hashed_in_upload = |len: usize| {
        trees_after_upload.get(&len).copied().unwrap_or(0) - trees_before_upload.get(&len).copied().unwrap_or(0)
    };
    // Chunk trees the upload hashed, counted (owner and node: U's on both sides, C's on the node).
    let (up_data_trees, up_coded_trees) = (hashed_in_upload(beta), hashed_in_upload(format.coded_block_bytes()));
    let upload_mb_s = file_bytes as f64 / upload_s / 1e6;
    let (up_sent, up_recv) = node.traffic();
    if std::env::var("DPOR_BENCH_ONLY").as_deref() == Ok("upload") {
        // For profiling the upload alone (`perf record`).
        server.shutdown().await;
        drop(builder);
        return format!(
            "upload: {upload_mb_s:.1} MB/s ({upload_s:.2} s), disk {disk_mb_s:.0} MB/s (median of {disk_runs}), chunk trees {up_data_trees} data + {up_coded_trees} coded blocks\n"
        );
    }

    // Breakdown, measured separately on the same data in this process.
    let keys = state.keys().unwrap();
    let blocks = flows::split_file(&file, beta, n).unwrap();
    let t = Instant::now();
    let mut records = Vec::with_capacity(n as usize * format.width());
    for (i, b) in blocks.iter().enumerate() {
        format.push_record(i as u64, b, &mut records).unwrap();
    }
    let records_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let c = dpor_core::code::c_rebuild(&records, n.trailing_zeros(), format.width()).unwrap();
    // C's transform alone (one of the floor's pieces below); the row "C-rebuild" is
    // the records and the transform.
    let transform_s = t.elapsed().as_secs_f64();
    let coding_s = records_s + transform_s;
    let t = Instant::now();
    let sums = keys.checksums(&records).unwrap();
    let checksum_s = t.elapsed().as_secs_f64();
    // σ̃ of N places sealed on the pool (one key per place: §5, `OwnerKeys::seal`); an
    // upload seals 3N (σ̃_U, and σ̃_C of C's 2N positions).
    let t = Instant::now();
    {
        use rayon::prelude::*;
        let sealed: Vec<_> = (0..n as usize)
            .into_par_iter()
            .map(|i| {
                let s: [dpor_core::Fp; dpor_core::checksum::RHO] = std::array::from_fn(|j| sums[i * dpor_core::checksum::RHO + j]);
                keys.seal(dpor_core::checksum::Place::U { index: i as u64 }, &s)
            })
            .collect();
        std::hint::black_box(sealed);
    }
    let seal_n_s = t.elapsed().as_secs_f64();
    drop(sums);
    let t = Instant::now();
    let coded: Vec<Vec<u8>> = c.chunks_exact(format.width()).map(|b| format.coded_to_bytes(b).unwrap()).collect();
    let _ = dpor_core::merkle::run_tree(&coded).unwrap().root();
    blocks.iter().for_each(|b| {
        std::hint::black_box(dpor_core::merkle::block_root(b));
    });
    let hashing_s = t.elapsed().as_secs_f64();

    // The upload's floor (issue 23): the work its format and protocol require, each
    // piece timed here on the whole pool (both cores) and multiplied by how often the
    // upload does it. Chunk trees as counted above; the transform of C alone (no
    // records); the owner's checksums; the signed request hash (PROTOCOL.md "The signed
    // hash") on each side, over the requests' ops, which name the blocks by their block
    // roots (issue 23 #3); 3N σ̃ sealed (timed above). Left out,
    // so that the floor is a lower bound of the time: Noise, CBOR, copies, records,
    // page faults, disk writes.
    let t = Instant::now();
    std::hint::black_box(dpor_core::merkle::block_roots(&coded));
    let coded_tree_s = t.elapsed().as_secs_f64() / coded.len() as f64;
    let t = Instant::now();
    let data_roots = std::hint::black_box(dpor_core::merkle::block_roots(&blocks));
    let data_tree_s = t.elapsed().as_secs_f64() / blocks.len() as f64;
    let per_request = batch_len(beta as u64 + 40) as usize;
    let ops: Vec<Vec<u8>> = data_roots
        .chunks(per_request)
        .enumerate()
        .map(|(k, r)| OwnerOp::UploadByRoots { start: (k * per_request) as u64, roots: r.to_vec(), sealed_u: vec![B256::ZERO; r.len()] }.to_bytes())
        .collect();
    let t = Instant::now();
    for op in &ops {
        std::hint::black_box(dpor_proto::messages::op_hash(op));
    }
    let op_hash_s = t.elapsed().as_secs_f64();
    let floor_trees_s = up_data_trees as f64 * data_tree_s + up_coded_trees as f64 * coded_tree_s;
    let up_floor_s = floor_trees_s + transform_s + checksum_s + 3.0 * seal_n_s + 2.0 * op_hash_s;
    let up_floor_mb_s = file_bytes as f64 / up_floor_s / 1e6;
    // The node's share alone (as if the owner ran on another machine): C's trees (the
    // counted coded trees but the owner's spot-checked ones), its half of U's, the
    // transform, one request hash.
    let node_coded_trees = up_coded_trees.saturating_sub(upload_report.spot_checked as u64);
    let node_floor_s = (up_data_trees as f64 / 2.0) * data_tree_s + node_coded_trees as f64 * coded_tree_s + transform_s + op_hash_s;
    let node_floor_mb_s = file_bytes as f64 / node_floor_s / 1e6;
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
    let secret = dpor_client::owner::secret_audit::secret_audit(&node, &state, 128, [5u8; 32]).await.unwrap();
    assert!(secret.passed(), "secret audit of an honest node failed: {:?}", secret.runs);
    let secret_bytes = (secret.bytes_sent + secret.bytes_received) as f64;
    let secret_fetched = secret.runs.iter().filter(|r| !r.cached).count();
    let disk_now = dir_bytes(&tmp.path().join("store"));

    // Batched random 4 KiB writes with deferred checks, a checkpoint (deferred checks
    // + the node's co-signature) every 1024 writes, against the plain Merkle store.
    let batch_writes: u64 = std::env::var("DPOR_BENCH_BATCH_WRITES").ok().and_then(|v| v.parse().ok()).unwrap_or(if quick { 2048 } else { 8192 });
    let per_batch: usize = std::env::var("DPOR_BENCH_BATCH").ok().and_then(|v| v.parse().ok()).unwrap_or(512);
    let checkpoint_every: u64 = 1024;
    state.block_cache_levels = std::env::var("DPOR_BENCH_BLOCK_CACHE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(dpor_client::owner_state::DEFAULT_BLOCK_CACHE_LEVELS);
    let gen_writes = |salt: u64| -> Vec<(u64, Vec<u8>)> {
        (0..batch_writes)
            .map(|w| {
                let i = mix(salt ^ mix(w)) % n;
                let b: Vec<u8> = (0..beta as u64 / 8).flat_map(|j| mix(salt ^ mix(w ^ mix(j))).to_le_bytes()).collect();
                (i, b)
            })
            .collect()
    };
    let writes_b = gen_writes(0xb47c);
    // λ = 128 again (the light writes above ran without spot-checks), and a first,
    // unmeasured batch of 300 writes so that the checkpoints do not all fall on t ≡ 0
    // mod 256 (where every level the owner's block cache covers is empty).
    state.lambda = 128;
    let warm = gen_writes(0x3a11);
    batch::write_batch(&node, &auth, &mut state, &warm[..300]).await.unwrap();
    batch::verify_deferred(&node, &auth, &mut state).await.unwrap();
    let (s0, r0) = node.traffic();
    let trees0 = dpor_core::merkle::chunk_tree_counts();
    if std::env::var("DPOR_BENCH_ONLY").as_deref() == Ok("batched") {
        // A mark for `perf record -k boottime` and `perf report --time START,`.
        let uptime = std::fs::read_to_string("/proc/uptime").unwrap_or_default();
        eprintln!("batched phase starts at boottime {}", uptime.split_whitespace().next().unwrap_or("?"));
    }
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    let mut version = 1;
    let mut checkpoint_s = 0.0;
    let (mut recomputed, mut spot_checked, mut samples, mut leaf_checked) = (0, 0, 0, 0);
    let mut done = 0u64;
    let mut due: Option<u64> = None;
    for chunk in writes_b.chunks(per_batch) {
        batch::write_batch_deferred(&node, &auth, &mut state, chunk).await.unwrap();
        let before = done;
        done += chunk.len() as u64;
        let crossed = done / checkpoint_every > before / checkpoint_every;
        // A checkpoint every 1024 writes, postponed while the node still builds a run
        // in the background (the owner writes on instead of waiting with a core idle)
        // for at most MAX_POSTPONED writes, and always at the end.
        due = if crossed && due.is_none() { Some(done) } else { due };
        let overdue = due.is_some_and(|d| done - d >= MAX_POSTPONED);
        if (due.is_some() && (overdue || !checkpoint_waits(&node, &mut state).await)) || done == batch_writes {
            due = None;
            let tc = Instant::now();
            let d = batch::verify_deferred(&node, &auth, &mut state).await.unwrap();
            recomputed += d.recomputed.len() + d.leaf_checked.len();
            leaf_checked += d.leaf_checked.len();
            spot_checked += d.spot_checked.len();
            samples += d.samples;
            let digest = flows::next_digest(&state, version);
            version += 1;
            let nonce = state.next_nonce();
            node.cosign(&auth, nonce, WireDigest::from(&digest)).await.unwrap();
            // The chain agent's part (no chain here): the digest is posted, so the node
            // keeps no more than its bound of co-signed digests waiting.
            store.set_posted(state.deal, &digest).unwrap();
            checkpoint_s += tc.elapsed().as_secs_f64();
        }
    }
    let batched_s = t.elapsed().as_secs_f64();
    let batched_cpu_us = (cpu_seconds() - cpu0) / batch_writes as f64 * 1e6;
    // Chunk trees hashed per write in the batched phase (owner and node together, the
    // background builder included), by kind: coded blocks and data blocks (counters in
    // dpor_core::merkle).
    let trees1 = dpor_core::merkle::chunk_tree_counts();
    let hashed = |len: usize| (trees1.get(&len).copied().unwrap_or(0) - trees0.get(&len).copied().unwrap_or(0)) as f64 / batch_writes as f64;
    let (coded_hashed, data_hashed) = (hashed(format.coded_block_bytes()), hashed(beta));
    let (s1, r1) = node.traffic();
    let batched_bytes = ((s1 - s0) + (r1 - r0)) as f64 / batch_writes as f64;
    let batched_mb_s = (batch_writes * beta as u64) as f64 / batched_s / 1e6;
    let disk_after_batches = dir_bytes(&tmp.path().join("store"));

    // The same batched writes over one whole C-rebuild period (N writes): the figure
    // above falls between two C-rebuilds; this one pays its share of one (the deferred
    // C build, its 2N coded blocks hashed and written, the owner's check of C at the
    // next checkpoint), i.e. the cost amortized over everything a write causes.
    let only_period = std::env::var("DPOR_BENCH_ONLY").as_deref() == Ok("period");
    let mut period_checkpoint_s = 0.0;
    let mut period_cpu0 = cpu_seconds();
    let only_latency = std::env::var("DPOR_BENCH_ONLY").as_deref() == Ok("latency");
    let (period_mb_s, period_us, period_rebuilds) = if std::env::var("DPOR_BENCH_ONLY").is_ok() && !only_period && !only_latency {
        (f64::NAN, f64::NAN, 0)
    } else {
        // The window starts N/2 writes after a C-rebuild (unmeasured writes first), so
        // its C-rebuild falls in the middle and the background build overlaps the
        // writes after it, as in a long run of writes; a window ending at a C-rebuild
        // would instead wait for the whole build at its last checkpoint. Any N
        // consecutive writes build every level equally often and C once.
        let lead = (n / 2 + n - state.write_count % n) % n;
        let mut salt = 0x9e71u64;
        let mut led = 0;
        while led < lead {
            let chunk = gen_writes(salt ^ 0x1ead);
            salt += 1;
            for part in chunk[..(lead - led).min(batch_writes) as usize].chunks(per_batch) {
                batch::write_batch_deferred(&node, &auth, &mut state, part).await.unwrap();
                led += part.len() as u64;
            }
        }
        batch::verify_deferred(&node, &auth, &mut state).await.unwrap();
        let rebuilds_before = state.rebuild_count;
        period_cpu0 = cpu_seconds();
        let t = Instant::now();
        let mut done = 0u64;
        let mut due: Option<u64> = None;
        while done < n {
            let chunk = gen_writes(salt);
            salt += 1;
            for part in chunk[..(n - done).min(batch_writes) as usize].chunks(per_batch) {
                batch::write_batch_deferred(&node, &auth, &mut state, part).await.unwrap();
                let before = done;
                done += part.len() as u64;
                let crossed = done / checkpoint_every > before / checkpoint_every;
                due = if crossed && due.is_none() { Some(done) } else { due };
                let overdue = due.is_some_and(|d| done - d >= MAX_POSTPONED);
                if (due.is_some() && (overdue || !checkpoint_waits(&node, &mut state).await)) || done == n {
                    due = None;
                    let tc = Instant::now();
                    batch::verify_deferred(&node, &auth, &mut state).await.unwrap();
                    period_checkpoint_s += tc.elapsed().as_secs_f64();
                    let digest = flows::next_digest(&state, version);
                    version += 1;
                    let nonce = state.next_nonce();
                    node.cosign(&auth, nonce, WireDigest::from(&digest)).await.unwrap();
                    store.set_posted(state.deal, &digest).unwrap();
                }
            }
        }
        let s = t.elapsed().as_secs_f64();
        ((n * beta as u64) as f64 / s / 1e6, s / n as f64 * 1e6, state.rebuild_count - rebuilds_before)
    };
    if only_period {
        // For profiling a whole C-rebuild period alone (`DPOR_BENCH_ONLY=period`).
        let cpu_us = (cpu_seconds() - period_cpu0) / n as f64 * 1e6;
        server.shutdown().await;
        drop(builder);
        return format!(
            "period: {period_mb_s:.2} MB/s, {period_us:.0} µs per write, {cpu_us:.0} µs of CPU per write (all threads), checkpoints {:.0}% of the time, {period_rebuilds} C-rebuild\n",
            100.0 * period_checkpoint_s / (period_us * n as f64 / 1e6)
        );
    }

    // The hashing floor of a batched write: the chunk trees (ENCODING §2) of what one
    // write puts under Merkle roots, amortized, on this run's thread pool (both cores):
    // one coded block per stored level (levels log2(batch)..k−1: level ℓ is built once
    // per 2^(ℓ+1) writes with 2^(ℓ+1) blocks, like bit ℓ of a counter of writes turning
    // to 1), two per write for C (2N blocks per N writes), and the new data block twice
    // (the node's U leaf, the owner's new leaf). Issue 23: this was counted as two
    // coded blocks per level before, which doubled the levels' share of the floor.
    let stored_levels = n.trailing_zeros().saturating_sub((per_batch as u64).trailing_zeros());
    let coded_per_write = stored_levels as usize + 2;
    let floor_blocks = 4096usize;
    let coded_sample: Vec<Vec<u8>> = (0..floor_blocks).map(|i| vec![(i % 253) as u8 ^ 0x5a; format.coded_block_bytes()]).collect();
    let data_sample: Vec<Vec<u8>> = (0..floor_blocks).map(|i| vec![(i % 251) as u8; beta]).collect();
    let t = Instant::now();
    std::hint::black_box(dpor_core::merkle::block_roots(&coded_sample));
    let coded_us = t.elapsed().as_secs_f64() / floor_blocks as f64 * 1e6;
    let t = Instant::now();
    std::hint::black_box(dpor_core::merkle::block_roots(&data_sample));
    let data_us = t.elapsed().as_secs_f64() / floor_blocks as f64 * 1e6;
    let t = Instant::now();
    {
        use rayon::prelude::*;
        let hashes: Vec<B256> = coded_sample.par_iter().map(alloy_primitives::keccak256).collect();
        std::hint::black_box(hashes);
    }
    let raw_coded_us = t.elapsed().as_secs_f64() / floor_blocks as f64 * 1e6;
    drop((coded_sample, data_sample));
    let floor_us = coded_per_write as f64 * coded_us + 2.0 * data_us;
    let floor_mb_s = beta as f64 / floor_us;
    let floor_whole_us = coded_per_write as f64 * raw_coded_us + 2.0 * data_us;
    if std::env::var("DPOR_BENCH_ONLY").as_deref() == Ok("batched") {
        // For profiling the batched write path alone (`perf record`): no latency run, no baseline.
        server.shutdown().await;
        drop(builder);
        return format!(
            "batched: {batched_mb_s:.2} MB/s, {:.0} µs per write, {batched_cpu_us:.0} µs of CPU per write (all threads), {batched_bytes:.0} B per write, checkpoints {:.0}% of the time\n",
            batched_s / batch_writes as f64 * 1e6,
            100.0 * checkpoint_s / batched_s
        );
    }

    // Write latency across one C-rebuild period (issue 11): N single-block requests one
    // after another (each durable on the node, checks deferred), so exactly one of them
    // runs the C-rebuild; the checkpoint checks every 1024 writes are not writes and are
    // left out. Without deamortized rebuilds (§6.1) the maximum is that C-rebuild.
    let mut latencies = Vec::with_capacity(n as usize);
    let rebuilds_before = state.rebuild_count;
    let mut checkpoint_max = 0f64;
    // `DPOR_BENCH_PERF_CTL=CTL,ACK`: the control and ack FIFOs of `perf record
    // --control fifo:CTL,ACK -D -1`; the profile is enabled from the write before the
    // C-rebuild for `DPOR_BENCH_PROFILE_WRITES` writes (the writes that follow a
    // C-rebuild were the slowest).
    let perf_ctl = std::env::var("DPOR_BENCH_PERF_CTL").ok().and_then(|v| v.split_once(',').map(|(c, a)| (c.to_string(), a.to_string())));
    let profile_window: u64 = std::env::var("DPOR_BENCH_PROFILE_WRITES").ok().and_then(|v| v.parse().ok()).unwrap_or(64);
    let perf_send = |ctl: &(String, String), cmd: &str| {
        std::fs::OpenOptions::new().write(true).open(&ctl.0).unwrap().write_all(format!("{cmd}\n").as_bytes()).unwrap();
        let mut ack = [0u8; 5];
        std::io::Read::read_exact(&mut std::fs::File::open(&ctl.1).unwrap(), &mut ack).unwrap();
    };
    let mut profiling_until = None;
    let mut profile_start = None;
    for w in 0..n {
        let i = mix(0x1a7e ^ mix(w)) % n;
        let block = vec![(w % 251) as u8; beta];
        if let Some(ctl) = &perf_ctl {
            // The write after this one is the C-rebuild (it ends the period's count).
            if profiling_until.is_none() && (state.write_count + 2).is_multiple_of(n) {
                perf_send(ctl, "enable");
                profile_start = Some(Instant::now());
                profiling_until = Some(w + profile_window);
            }
        }
        let t = Instant::now();
        let since = profile_start.map(|s: Instant| (t - s).as_secs_f64() * 1e3).unwrap_or(0.0);
        batch::write_batch(&node, &auth, &mut state, &[(i, block)]).await.unwrap();
        latencies.push(t.elapsed().as_secs_f64());
        if profiling_until.is_some_and(|u| w <= u) {
            eprintln!("window write {w}: start {since:.1} ms after enable, {:.1} ms, t = {}", t.elapsed().as_secs_f64() * 1e3, state.write_count);
        }
        if profiling_until == Some(w) {
            if let Some(ctl) = &perf_ctl {
                perf_send(ctl, "disable");
            }
        }
        if t.elapsed() > Duration::from_millis(50) {
            // Its end in /proc/uptime's seconds (`perf record -k boottime`), to find it in a profile.
            let uptime = std::fs::read_to_string("/proc/uptime").unwrap_or_default();
            eprintln!(
                "slow write: {:.0} ms at t = {} (write {w} of the period), ended at uptime {} s",
                t.elapsed().as_secs_f64() * 1e3,
                state.write_count,
                uptime.split_whitespace().next().unwrap_or("?")
            );
        }
        if (w + 1) % checkpoint_every == 0 {
            let t = Instant::now();
            batch::verify_deferred(&node, &auth, &mut state).await.unwrap();
            checkpoint_max = checkpoint_max.max(t.elapsed().as_secs_f64());
        }
    }
    assert_eq!(state.rebuild_count, rebuilds_before + 1, "N writes cross exactly one C-rebuild");
    latencies.sort_by(f64::total_cmp);
    let pct = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)] * 1e3;
    let (lat_p50, lat_p99, lat_max) = (pct(0.5), pct(0.99), latencies[latencies.len() - 1] * 1e3);
    let checkpoint_max_ms = checkpoint_max * 1e3;
    server.shutdown().await;
    drop(builder);
    if only_latency {
        // For profiling the single-write latency run alone (`DPOR_BENCH_ONLY=latency`).
        return format!("latency: p50 {lat_p50:.1} ms, p99 {lat_p99:.1} ms, max {lat_max:.0} ms, longest checkpoint {checkpoint_max_ms:.0} ms\n");
    }

    // The plain Merkle store over the same transport, the same writes and batches.
    let plain_dir = tempfile::tempdir().unwrap();
    let plain_blocks: Vec<Vec<u8>> = (0..n).map(|i| vec![(i % 251) as u8; beta]).collect();
    let plain = Arc::new(PlainMerkle::new(plain_dir.path(), &plain_blocks));
    let mut plain_root = plain.inner.lock().unwrap().tree.root();
    drop(plain_blocks);
    let pserver = net::serve(net::load_or_create_keypair(&plain_dir.path().join("p2p.key")).unwrap(), "/ip4/127.0.0.1/tcp/0".parse().unwrap(), plain, NetConfig::default())
        .await
        .unwrap();
    let paddr = pserver.listen_addrs()[0].clone().with(libp2p::multiaddr::Protocol::P2p(pserver.peer_id()));
    let pclient = NodeClient::connect(&paddr.to_string(), Duration::from_secs(600)).await.unwrap();
    let (s0, r0) = pclient.traffic();
    let t = Instant::now();
    let mut pnonce = 0;
    for chunk in writes_b.chunks(per_batch) {
        plain_root = plain_writes(&pclient, &auth, plain_root, n.trailing_zeros(), chunk, &mut pnonce).await;
    }
    let plain_s = t.elapsed().as_secs_f64();
    let (s1, r1) = pclient.traffic();
    let plain_bytes = ((s1 - s0) + (r1 - r0)) as f64 / batch_writes as f64;
    let plain_mb_s = (batch_writes * beta as u64) as f64 / plain_s / 1e6;
    pserver.shutdown().await;

    let mib = file_bytes >> 20;
    // Headline figures, one line each (names checked from outside: keep them).
    let stored_mb_s = disk_after_upload as f64 / upload_s / 1e6;
    for (name, value) in [
        ("batched_mb_s", batched_mb_s),
        ("batched_vs_plain", batched_mb_s / plain_mb_s),
        ("batched_amortized_mb_s", period_mb_s),
        ("upload_vs_disk", upload_mb_s / disk_mb_s),
        ("upload_stored_vs_disk", stored_mb_s / disk_mb_s),
        ("upload_floor_vs_disk", up_floor_mb_s / disk_mb_s),
        ("upload_node_floor_vs_disk", node_floor_mb_s / disk_mb_s),
        ("upload_vs_floor", upload_mb_s / up_floor_mb_s),
        ("write_p99_ms", lat_p99),
        ("write_max_ms", lat_max),
        ("bytes_per_batched_write_vs_merkle", batched_bytes / merkle_baseline),
        ("coded_blocks_hashed_per_write", coded_hashed),
        ("data_blocks_hashed_per_write", data_hashed),
    ] {
        println!("figure {name} {value:.3}");
    }
    let owner_state = if state.path.is_some() {
        "the owner's state in a file, saved at every step as the `dpor` command's owner keeps it"
    } else {
        "the owner's state in memory only (`DPOR_BENCH_OWNER_FILE=0`)"
    };
    format!(
        "Measured {date} on this machine, one run; owner, node and network in one process over loopback TCP + Noise + Yamux; {owner_state}.\n\n\
| figure | value | against |\n|---|---|---|\n\
| upload of {mib} MiB (n = {n}), end to end | {upload_mb_s:.1} MB/s ({upload_s:.1} s) | disk sequential write {disk_mb_s:.0} MB/s (median of {disk_runs}): **{r_up:.2}×** (target ≥ 0.15×; in stored bytes {r_up_stored:.2}×, target ≥ 0.5×) |\n\
| — C-rebuild (FFT) of the file | {coding_s:.2} s | {p_code:.0}% of the upload |\n\
| — owner checksums σ of every block | {checksum_s:.2} s | {p_sum:.0}% |\n\
| — keccak chunk trees (U blocks + C run tree) | {hashing_s:.2} s | {p_hash:.0}% |\n\
| — the rest (network, disk, σ̃ sealing, spot-checks) | {rest_s:.2} s | {p_rest:.0}% |\n\
| chunk trees the upload hashed, counted (owner and node) | {up_data_trees} data blocks, {up_coded_trees} coded blocks | N = {n}: U on both sides (2N), C's 2N coded blocks on the node and the owner's {spot} spot-checked ones |\n\
| the upload's floor: the work it must do, each piece timed alone on both cores (the counted chunk trees {floor_trees_s:.2} s at {data_tree_us:.1} / {coded_tree_us:.1} µs per data / coded block, C's transform {transform_s:.2} s, the owner's checksums {checksum_s:.2} s and 3N σ̃ sealed 3 × {seal_n_s:.2} s, the signed request hash on both sides (over the block roots) 2 × {op_hash_s:.3} s; not counted: Noise, CBOR, copies, records, disk) | {up_floor_s:.2} s: at most **{up_floor_mb_s:.0} MB/s** if the upload did nothing else | disk: **{r_floor:.2}×** (target ≥ 0.15×); this upload reached {r_to_floor:.2}× its floor |\n\
| the node's share of that floor (its half of U's trees, C's trees, the transform, one request hash): the upload with the owner on another machine | {node_floor_s:.2} s: at most **{node_floor_mb_s:.0} MB/s** | disk: **{r_node_floor:.2}×** |\n\
| upload bytes on the wire | {up_mb:.1} MB | {r_wire:.3}× the file |\n\
| bytes on the wire per 4 KiB write, n = {n}, with the owner's spot-checks (λ = 128) | {per_write:.0} B | β + Merkle path = {merkle_baseline:.0} B: **{r_w:.2}×** |\n\
| the same without spot-checks (write, old path, σ̃ traffic) | {per_write_light:.0} B | **{r_wl:.3}×** (target ≤ 1.1×) |\n\
| time per write (with spot-checks) | {write_ms:.1} ms | |\n\
| public audit, λ = 128, {runs} runs ({checked} samples) | {audit_kb:.0} KB, {audit_ms:.0} ms | |\n\
| secret audit (owner, §5.5) of the same runs, λ = 128 ({secret_fetched} runs with σ̃ fetched, the others' σ cached) | {secret_kb:.1} KB, {secret_ms:.0} ms | public audit: **{r_sb:.3}× the bytes** (target ≤ 0.2×), {r_st:.2}× the time |\n\
| disk bytes per file byte after upload (U + C + trees + metadata) | {d_up:.2} | |\n\
| disk bytes per file byte after {w2} writes | {d_now:.2} | |\n\
| **random 4 KiB writes, durable, batches of {per_batch}, deferred checks, checkpoint (checks + co-signature) every {checkpoint_every} writes, postponed while the node builds a run in the background**, {batch_writes} writes | **{batched_mb_s:.2} MB/s** ({batched_us:.0} µs per write; checkpoints {p_cp:.0}% of the time) | plain Merkle store, same transport and batches: {plain_mb_s:.2} MB/s: **{r_bw:.2}×** (target ≥ 20 MB/s and ≥ 0.33×) |\n\
| bytes on the wire per 4 KiB write, batched, everything amortized (paths, σ̃, checkpoint checks: {recomputed} runs recomputed from the owner's block cache of {bcl} levels, {leaf_checked} of them checked by their leaves, {spot_checked} spot-checked; {samples} samples) | {batched_bytes:.0} B | β + Merkle path = {merkle_baseline:.0} B: **{r_bb:.3}×** (target ≤ 1.2×); plain Merkle store measured: {plain_bytes:.0} B ({r_pb:.3}×) |\n\
| the same batched writes over a whole C-rebuild period ({n} writes from N/2 after a C-rebuild, {period_rebuilds} C-rebuild in the middle, built by the background builder while the writes go on; checkpoints every {checkpoint_every}, postponed past background builds) | **{period_mb_s:.2} MB/s** ({period_us:.0} µs per write) | plain Merkle store above: **{r_period:.2}×** (target ≥ 16 MB/s) |\n\
| chunk trees hashed per batched write, counted (owner and node, background builds included) | {coded_hashed:.2} coded blocks, {data_hashed:.2} data blocks | the floor's count below: {coded_per_write} coded, 2 data |\n\
| hashing floor of one batched write: chunk trees of {coded_per_write} coded blocks (1 for each of {stored_levels} stored levels, 2 for C) and 2 data blocks, on both cores, measured here | {floor_us:.0} µs: at most **{floor_mb_s:.1} MB/s** if a write did nothing else | plain Merkle store's whole write: {plain_us:.0} µs; with whole-block run leaves (one keccak256 per coded block: {raw_coded_us:.1} µs against {coded_us:.1} µs per block on the same pool) the floor would be {floor_whole_us:.0} µs |\n\
| disk bytes per file byte after the batched writes | {d_batch:.2} | |\n\
| write latency, {n} single-block requests (durable, checks deferred, rebuilds of ≥ {defer_from} blocks in the background) across one C-rebuild | p50 {lat_p50:.1} ms, p99 {lat_p99:.1} ms, max {lat_max:.0} ms | target p99 ≤ 20 ms, max ≤ 100 ms |\n\
| — the longest checkpoint check among them (every {checkpoint_every} writes; waits for pending builds) | {checkpoint_max_ms:.0} ms | not a write |\n",
        date = "the date of the run",
        r_up = upload_mb_s / disk_mb_s,
        r_up_stored = stored_mb_s / disk_mb_s,
        p_code = 100.0 * coding_s / upload_s,
        p_sum = 100.0 * checksum_s / upload_s,
        p_hash = 100.0 * hashing_s / upload_s,
        rest_s = (upload_s - coding_s - checksum_s - hashing_s).max(0.0),
        data_tree_us = data_tree_s * 1e6,
        spot = upload_report.spot_checked,
        coded_tree_us = coded_tree_s * 1e6,
        r_floor = up_floor_mb_s / disk_mb_s,
        r_to_floor = upload_mb_s / up_floor_mb_s,
        r_node_floor = node_floor_mb_s / disk_mb_s,
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
        batched_us = batched_s / batch_writes as f64 * 1e6,
        p_cp = 100.0 * checkpoint_s / batched_s,
        r_bw = batched_mb_s / plain_mb_s,
        bcl = state.block_cache_levels,
        r_bb = batched_bytes / merkle_baseline,
        r_pb = plain_bytes / merkle_baseline,
        d_batch = disk_after_batches as f64 / file_bytes as f64,
        r_period = period_mb_s / plain_mb_s,
        plain_us = plain_s / batch_writes as f64 * 1e6,
    )
}
