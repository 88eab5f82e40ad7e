//! On-chain cost of proving storage: today's per-deal epoch proofs against one epoch
//! commitment per provider (docs/COMMITMENTS.md), on anvil with real processes
//! (`script/bench-chain`; a benchmark, not a timed test, so `harness = false`).
//!
//! One chain (`dpor_chain::Devnet`: anvil + the contracts), ONE provider (a real
//! `dpor-node`, release build, on a fixed loopback port so that its registered address
//! stays valid across restarts) and a growing number of deals D = 1, 10, 100, 1000
//! (`DPOR_BENCH_QUICK=1`: 1, 10; `DPOR_BENCH_DEALS=1,10,…` any list, ascending). The
//! deals are opened, uploaded and checkpointed with the real CLI (`dpor deal open`,
//! `upload`, `checkpoint`), several processes at once, one owner key per lane
//! (`DPOR_BENCH_LANES`, default 6), each deal with its own state file: N = 16 blocks of
//! β = 4096 bytes (the CLI's default β, so a per-deal proof costs what it costs today),
//! K = 1 sample per epoch, λ = 8, 100 epochs. For each D (cumulatively: the deals of the
//! smaller D stay) it prints ONE line on stdout:
//!
//! `deals=D per_deal_proofs_gas=P commitment_gas=G challenge_answer_gas=A node_epoch_seconds=S watch_epoch_seconds=W`
//!
//! - P: the node runs WITHOUT `--epoch-commitments` for one global epoch g and proves
//!   every deal on its own (`submitEpochProof`); P is the sum of the receipts' gasUsed
//!   of ALL D `EpochProven` transactions of that epoch (measured, not sampled).
//! - G: the node is restarted WITH `--epoch-commitments` and the chain warped to g + 1;
//!   G is the gasUsed of its one `commitEpoch` transaction (the `EpochCommitted` log's
//!   receipt).
//! - A: the auditor account challenges one deal's committed entry
//!   (`Market::challenge_entry`, not the safety draw's deal); A is the gasUsed of the
//!   node's `answerChallenge` (the `ChallengeAnswered` log's receipt).
//! - S: the node's `build_seconds=` of its `epoch committed` log line (building every
//!   response and the tree, keeping them; not the chain reads before it nor the send).
//! - W: `seconds` of the `"action":"pass"` line of one
//!   `dpor --json watch --commitments-only --once --all --watch-state F` (fresh state
//!   file) as the auditor, which must report `commitment-ok` for every one of the D
//!   deals (the bench fails otherwise).
//!
//! Lines starting with `# ` are comments (not checked): setup and measure times, the
//! mean gas per epoch with the amortized safety draw (1 epoch in SAFETY_PERIOD = 16
//! draws one deal: + (answer + the draw's extra commitEpoch gas) / 16, the extra
//! bounded above by the challengeEntry transaction's gas − 21000, which does the same
//! bookkeeping plus the bond's transfer; a draw actually seen is printed too) and the
//! issue's targets, met or not (the bench never fails on them).
//!
//! With `DPOR_BENCH_OUT=FILE` it also writes the figures as markdown for
//! docs/PERFORMANCE.md. anvil and the node are killed on every exit path (drop guards;
//! Ctrl-C and SIGTERM end the run through them).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::types::Filter;
use alloy::sol_types::SolEvent;
use anyhow::{bail, ensure, Context, Result};
use dpor_chain::bindings::DporMarket;
use dpor_chain::{Address, ChallengeState, Devnet, EpochStatus, Market, ANVIL_KEYS, B256, U256};
use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Anvil account of the provider (the node's key).
const PROVIDER: usize = 1;
/// Anvil account of the watcher / challenger.
const AUDITOR: usize = 3;
/// Owner accounts, one per lane of deal creation.
const OWNERS: [usize; 8] = [2, 4, 5, 6, 7, 8, 9, 0];
/// Blocks per deal and bytes per block.
const BLOCKS: usize = 16;
const BETA: usize = 4096;
/// `SAFETY_PERIOD` of the market (docs/COMMITMENTS.md §5).
const SAFETY_PERIOD: u64 = 16;

fn e18(n: u64) -> U256 {
    U256::from(n) * U256::from(10u64).pow(U256::from(18u64))
}

fn note(msg: impl AsRef<str>) {
    eprintln!("bench-chain: {}", msg.as_ref());
}

/// The `dpor-node` binary: `DPOR_NODE_BIN`, or a release build by cargo itself (as the
/// e2e harness does; without the `testing` feature: no cheat modes are needed).
fn node_bin() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("DPOR_NODE_BIN") {
        return Ok(PathBuf::from(p));
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["build", "--locked", "--release", "-p", "dpor-node", "--bin", "dpor-node", "--message-format=json-render-diagnostics"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo build -p dpor-node")?;
    ensure!(out.status.success(), "cargo build -p dpor-node failed");
    let exe = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "dpor-node")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .context("no dpor-node executable in cargo's output")?;
    Ok(exe)
}

/// The running node: SIGTERM (then kill) and reap on drop.
struct Node {
    child: Option<std::process::Child>,
    log: PathBuf,
}

impl Node {
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = std::process::Command::new("kill").args(["-TERM", &c.id().to_string()]).status();
            let until = Instant::now() + Duration::from_secs(15);
            while Instant::now() < until {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Everything of one run.
struct World {
    dev: Devnet,
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    provider: Address,
    rpc: DynProvider,
    starts: u32,
}

impl World {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Starts the node (with or without `--epoch-commitments`) and waits until it
    /// listens (and, the first time, has registered).
    async fn start_node(&mut self, commitments: bool) -> Result<Node> {
        self.starts += 1;
        let addr_file = self.path("node.addr");
        let _ = std::fs::remove_file(&addr_file);
        let log = self.path(&format!("node-{}.log", self.starts));
        let f = std::fs::File::create(&log)?;
        let mut cmd = std::process::Command::new(&self.bin);
        cmd.args(["run", "--data-dir"])
            .arg(self.path("node"))
            .args(["--listen", &format!("/ip4/127.0.0.1/tcp/{}", self.port), "--rpc-url", self.dev.rpc_url(), "--market"])
            .arg(format!("{:?}", self.dev.market()))
            .arg("--provider-key-file")
            .arg(self.path(&format!("key{PROVIDER}")))
            .arg("--addr-file")
            .arg(&addr_file)
            .args(["--poll-interval-ms", "200"])
            .env("RUST_LOG", "info,libp2p=warn")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(f.try_clone()?)
            .stderr(f);
        if commitments {
            cmd.arg("--epoch-commitments");
        }
        let mut node = Node { child: Some(cmd.spawn().context("starting dpor-node")?), log };
        let p = self.dev.client(PROVIDER).await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            ensure!(node.alive(), "the node exited:\n{}", node.log_text());
            if addr_file.exists() && p.get_provider(self.provider).await.map(|p| p.registered).unwrap_or(false) {
                break;
            }
            ensure!(Instant::now() < deadline, "the node did not come up within 60 s:\n{}", node.log_text());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(node)
    }

    /// Runs `dpor --json ARGS` as anvil account `key` with owner state `state`.
    async fn dpor(&self, key: usize, state: &Path, args: &[&str]) -> Result<(serde_json::Value, String)> {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dpor"))
            .arg("--json")
            .args(args)
            .env("DPOR_RPC_URL", self.dev.rpc_url())
            .env("DPOR_MARKET", format!("{:?}", self.dev.market()))
            .env("DPOR_KEY_FILE", self.path(&format!("key{key}")))
            .env("DPOR_STATE", state)
            .env_remove("DPOR_NODE")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .context("running dpor")?;
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        ensure!(out.status.success(), "dpor {args:?} failed:\nstdout: {stdout}\nstderr: {}", String::from_utf8_lossy(&out.stderr));
        let json = stdout
            .lines()
            .find(|l| l.trim_start().starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or(serde_json::Value::Null);
        Ok((json, stdout))
    }

    /// Opens, uploads and checkpoints `n` deals with the CLI, `lanes` at once.
    async fn open_deals(&self, n: usize, first: usize, lanes: usize) -> Result<Vec<u64>> {
        let file = self.path("file");
        let file = file.to_str().context("utf-8 path")?.to_string();
        let provider = format!("{:?}", self.provider);
        let lanes = lanes.clamp(1, OWNERS.len()).min(n.max(1));
        let mut tasks = Vec::new();
        for (lane, &owner) in OWNERS.iter().enumerate().take(lanes) {
            let count = n / lanes + usize::from(lane < n % lanes);
            let (file, provider) = (file.clone(), provider.clone());
            tasks.push(async move {
                let mut ids = Vec::new();
                for j in 0..count {
                    let state = self.path(&format!("owner-{}.json", first + j * lanes + lane));
                    let st = state.to_str().context("utf-8 path")?;
                    let open = ["--state", st, "deal", "open", "--provider", &provider, "--file", &file, "--lambda", "8", "--samples", "1", "--epochs", "100", "--mint"];
                    let (j, out) = self.dpor(owner, &state, &open).await?;
                    let deal = j["deal"].as_u64().with_context(|| format!("no deal id in {out}"))?;
                    self.dpor(owner, &state, &["--state", st, "upload", &file]).await?;
                    self.dpor(owner, &state, &["--state", st, "checkpoint"]).await?;
                    ids.push(deal);
                }
                Ok::<_, anyhow::Error>(ids)
            });
        }
        let mut all = Vec::new();
        for r in futures_join(tasks).await {
            all.extend(r?);
        }
        Ok(all)
    }

    /// Receipts' gasUsed of the transactions of `event` logs (topic 1 = `topic1` if
    /// given) from block `from` on: (topic 1 of the log, gas, tx hash) each.
    async fn event_gas(&self, sig: B256, topic1: Option<B256>, from: u64) -> Result<Vec<(B256, u64, B256)>> {
        let mut f = Filter::new().address(self.dev.market()).event_signature(sig).from_block(from);
        if let Some(t) = topic1 {
            f = f.topic1(t);
        }
        let logs = self.rpc.get_logs(&f).await?;
        let mut out = Vec::new();
        for l in logs {
            let tx = l.transaction_hash.context("log without a transaction hash")?;
            let r = self.rpc.get_transaction_receipt(tx).await?.context("no receipt")?;
            let t1 = l.topics().get(1).copied().unwrap_or_default();
            out.push((t1, r.gas_used, tx));
        }
        Ok(out)
    }
}

/// Awaits all futures concurrently, results in order.
async fn futures_join<F: std::future::Future>(fs: Vec<F>) -> Vec<F::Output> {
    let mut pinned: Vec<_> = fs.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = (0..pinned.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in pinned.iter_mut().enumerate() {
            if out[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => out[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(|o| o.expect("every future finished")).collect()
}

/// The value of `key=` in a tracing log line (ANSI escapes removed first).
fn field(line: &str, key: &str) -> Option<String> {
    let mut clean = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            clean.push(c);
        }
    }
    clean.split_whitespace().find_map(|w| w.strip_prefix(&format!("{key}=")).map(str::to_string))
}

/// One D's figures.
struct Row {
    deals: usize,
    per_deal: u64,
    commit: u64,
    answer: u64,
    node_s: f64,
    watch_s: f64,
    entry_gas: u64,
    draw: Option<(u64, u64)>,
    setup_s: f64,
    measure_s: f64,
    per_deal_phase_s: f64,
}

impl Row {
    fn line(&self) -> String {
        format!(
            "deals={} per_deal_proofs_gas={} commitment_gas={} challenge_answer_gas={} node_epoch_seconds={:.4} watch_epoch_seconds={:.3}",
            self.deals, self.per_deal, self.commit, self.answer, self.node_s, self.watch_s
        )
    }

    fn comments(&self) -> Vec<String> {
        let extra = self.entry_gas.saturating_sub(21_000);
        let mean = self.commit as f64 + (self.answer + extra) as f64 / SAFETY_PERIOD as f64;
        let met = |b: bool| if b { "met" } else { "NOT met" };
        let mut v = vec![
            format!(
                "# deals={} mean_gas_per_epoch_with_safety_draw={:.0} (commitEpoch {} + (answer {} + draw extra ≤ {}) / {}; the extra bounded by challengeEntry gas {} − 21000); per-deal proofs {:.0} gas per deal, commitment {:.1}x cheaper",
                self.deals,
                mean,
                self.commit,
                self.answer,
                extra,
                SAFETY_PERIOD,
                self.entry_gas,
                self.per_deal as f64 / self.deals as f64,
                self.per_deal as f64 / self.commit.max(1) as f64
            ),
            format!(
                "# deals={} targets (issue 22, stated for 1000 deals): commitment ≤ 100000 gas per provider per epoch: {} ({}; with draws {:.0}: {}); answer ≤ 300000: {}; node ≤ 60 s per epoch: {}; watch ≤ 300 s: {}",
                self.deals,
                met(self.commit <= 100_000),
                self.commit,
                mean,
                met(mean <= 100_000.0),
                met(self.answer <= 300_000),
                met(self.node_s <= 60.0),
                met(self.watch_s <= 300.0)
            ),
            format!(
                "# deals={} times: setup (open, upload, checkpoint the new deals) {:.1} s; measure {:.1} s, of which the per-deal proof epoch {:.1} s",
                self.deals, self.setup_s, self.measure_s, self.per_deal_phase_s
            ),
        ];
        if let Some((c, a)) = self.draw {
            v.push(format!("# deals={} this commitment drew a safety challenge: commitEpoch with the draw {c} gas, its answer {a} gas", self.deals));
        }
        v
    }
}

async fn run() -> Result<()> {
    let sizes: Vec<usize> = if let Ok(s) = std::env::var("DPOR_BENCH_DEALS") {
        s.split(',').map(|x| x.trim().parse().context("DPOR_BENCH_DEALS: a list of numbers")).collect::<Result<_>>()?
    } else if std::env::var("DPOR_BENCH_QUICK").is_ok_and(|v| v == "1") {
        vec![1, 10]
    } else {
        vec![1, 10, 100, 1000]
    };
    ensure!(sizes.windows(2).all(|w| w[0] < w[1]) && sizes.first().is_some_and(|&d| d > 0), "deal counts must ascend from ≥ 1");
    let lanes: usize = std::env::var("DPOR_BENCH_LANES").ok().and_then(|v| v.parse().ok()).unwrap_or(6);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());

    let bin = node_bin()?;
    note(format!("node binary {}", bin.display()));
    let t = Instant::now();
    let dev = Devnet::start(None).await.context("devnet (is `npm install` done?)")?;
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().to_path_buf();
    for (i, k) in ANVIL_KEYS.iter().enumerate() {
        std::fs::write(dir.join(format!("key{i}")), k)?;
    }
    let data: Vec<u8> = (0..BLOCKS * BETA).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1]).collect();
    std::fs::write(dir.join("file"), data)?;
    let provider = dev.key(PROVIDER).address();
    dev.client(PROVIDER).await?.mint(provider, e18(10_000_000)).await?;
    let auditor = dev.client(AUDITOR).await?;
    auditor.mint(dev.key(AUDITOR).address(), e18(1_000_000)).await?;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let rpc = ProviderBuilder::new().connect_http(dev.rpc_url().parse()?).erased();
    let mut w = World { dev, dir, bin, port, provider, rpc, starts: 0 };
    let mut node = w.start_node(true).await?;
    let params = auditor.params().await?;
    note(format!("chain and node up in {:.1} s (epoch {} s, {cores} cores)", t.elapsed().as_secs_f64(), params.epoch_seconds));

    let mut rows: Vec<Row> = Vec::new();
    let mut made = 0usize;
    for &d in &sizes {
        let t0 = Instant::now();
        let ids = w.open_deals(d - made, made, lanes).await?;
        made = d;
        let setup_s = t0.elapsed().as_secs_f64();
        note(format!("deals={d}: {} new deals opened, uploaded and checkpointed in {setup_s:.1} s", ids.len()));
        let t1 = Instant::now();

        // Epoch g: per-deal proofs by a node without --epoch-commitments.
        let now = w.dev.timestamp().await?;
        let g = params.global_epoch_at(now).context("no global epoch")? + 1;
        // Stopped before the warp and started after it: a per-deal node running in the
        // epoch before would prove the committed (unsettled) entries of that epoch too.
        node.stop();
        let from = w.dev.block_number().await?;
        w.dev.warp_to(params.global_start(g)).await?;
        node = w.start_node(false).await?;
        let deadline = Instant::now() + Duration::from_secs(120 + 2 * d as u64);
        let proofs = loop {
            let p = w.event_gas(DporMarket::EpochProven::SIGNATURE_HASH, None, from).await?;
            let deals: BTreeSet<B256> = p.iter().map(|x| x.0).collect();
            if deals.len() >= d {
                break p;
            }
            ensure!(node.alive(), "the node exited:\n{}", node.log_text());
            ensure!(Instant::now() < deadline, "only {} of {d} deals proven in epoch {g}:\n{}", deals.len(), node.log_text());
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        ensure!(proofs.len() == d, "{} EpochProven logs for {d} deals", proofs.len());
        let per_deal: u64 = proofs.iter().map(|x| x.1).sum();
        let per_deal_phase_s = t1.elapsed().as_secs_f64();
        note(format!("deals={d}: {} per-deal proofs, {per_deal} gas in all ({per_deal_phase_s:.1} s)", proofs.len()));

        // Epoch g + 1: one commitment by a node with --epoch-commitments.
        let g1 = g + 1;
        node.stop();
        let from = w.dev.block_number().await?;
        w.dev.warp_to(params.global_start(g1)).await?;
        node = w.start_node(true).await?;
        let deadline = Instant::now() + Duration::from_secs(300);
        let ev = loop {
            let evs = auditor.commitments_of(w.provider, from).await?;
            if let Some(e) = evs.into_iter().find(|e| e.global_epoch == g1) {
                break e;
            }
            ensure!(node.alive(), "the node exited:\n{}", node.log_text());
            ensure!(Instant::now() < deadline, "no commitment for epoch {g1}:\n{}", node.log_text());
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        ensure!(ev.leaf_count as usize == d, "the commitment has {} entries for {d} deals:\n{}", ev.leaf_count, node.log_text());
        let committed = w.event_gas(DporMarket::EpochCommitted::SIGNATURE_HASH, Some(w.provider.into_word()), from).await?;
        let commit = committed.last().context("no EpochCommitted receipt")?.1;
        // The node logs the line after it has the receipt: it may come a moment after the log.
        let deadline = Instant::now() + Duration::from_secs(30);
        let line = loop {
            let found = node
                .log_text()
                .lines()
                .find(|l| l.contains("epoch committed") && field(l, "global_epoch").as_deref() == Some(g1.to_string().as_str()))
                .map(str::to_string);
            if let Some(l) = found {
                break l;
            }
            ensure!(Instant::now() < deadline, "no `epoch committed` line in the node's log:\n{}", node.log_text());
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let node_s: f64 = field(&line, "build_seconds").context("no build_seconds=")?.parse()?;
        if let Some(lg) = field(&line, "gas") {
            ensure!(lg == commit.to_string(), "the node logged gas={lg}, the receipt says {commit}");
        }

        // The safety draw, if any: wait for the node's answer.
        let mut draw = None;
        if ev.safety_challenge_id != 0 {
            let q = ev.safety_challenge_id;
            wait_answered(&auditor, &node, q).await?;
            let a = w.event_gas(DporMarket::ChallengeAnswered::SIGNATURE_HASH, Some(B256::from(U256::from(q))), from).await?;
            draw = Some((commit, a.first().context("no ChallengeAnswered receipt")?.1));
        }

        // A watcher's challenge of one honest entry, answered by the node.
        let mut target = None;
        for id in ids.iter().copied().chain(1..=d as u64) {
            let deal = auditor.get_deal(id).await?;
            let e = g1 - deal.start_epoch;
            if auditor.epoch_status(id, e).await? == EpochStatus::None {
                target = Some((id, e));
                break;
            }
        }
        let (cd, ce) = target.context("no unsettled entry to challenge")?;
        let bond = auditor.dispute_bond().await?;
        auditor.ensure_allowance(U256::from(bond)).await?;
        let cfrom = w.dev.block_number().await?;
        let q = auditor.challenge_entry(cd, ce).await?;
        let opened = w.event_gas(DporMarket::ChallengeOpened::SIGNATURE_HASH, Some(B256::from(U256::from(q))), cfrom).await?;
        let entry_gas = opened.first().context("no ChallengeOpened receipt")?.1;
        wait_answered(&auditor, &node, q).await?;
        let answered = w.event_gas(DporMarket::ChallengeAnswered::SIGNATURE_HASH, Some(B256::from(U256::from(q))), cfrom).await?;
        let answer = answered.first().context("no ChallengeAnswered receipt")?.1;

        // One watch pass over every deal.
        let ws = w.path(&format!("watch-{d}.json"));
        let wss = ws.to_str().context("utf-8 path")?;
        let (_, out) = w.dpor(AUDITOR, &ws, &["watch", "--commitments-only", "--once", "--all", "--watch-state", wss]).await?;
        let acts: Vec<serde_json::Value> =
            out.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).filter(|v| v.get("action").is_some()).collect();
        let ok: BTreeSet<u64> = acts.iter().filter(|a| a["action"] == "commitment-ok").filter_map(|a| a["deal"].as_u64()).collect();
        let bad: Vec<&serde_json::Value> =
            acts.iter().filter(|a| !matches!(a["action"].as_str(), Some("commitment-ok" | "pass" | "withdraw"))).collect();
        ensure!(bad.is_empty(), "the watch pass did more than verify: {bad:?}");
        ensure!(ok.len() == d, "the watch pass verified {} of {d} deals:\n{out}", ok.len());
        let pass = acts.iter().rev().find(|a| a["action"] == "pass").context("no pass line in the watch output")?;
        let watch_s = pass["seconds"].as_f64().context("no seconds in the pass line")?;

        let row = Row {
            deals: d,
            per_deal,
            commit,
            answer,
            node_s,
            watch_s,
            entry_gas,
            draw,
            setup_s,
            measure_s: t1.elapsed().as_secs_f64(),
            per_deal_phase_s,
        };
        println!("{}", row.line());
        for c in row.comments() {
            println!("{c}");
        }
        std::io::stdout().flush()?;
        rows.push(row);
    }
    node.stop();

    if let Some(path) = std::env::var_os("DPOR_BENCH_OUT") {
        let mut s = String::new();
        s.push_str(&format!(
            "Measured {} on {cores} cores with `script/bench-chain` (verifier-cli/benches/chain.rs): anvil, one provider (a release `dpor-node`), deals of N = {BLOCKS} blocks of β = {BETA} bytes, K = 1, cumulative on one chain. Per-deal proofs: every deal's `submitEpochProof` of one epoch, all measured (not sampled); commitment: the `commitEpoch` of the next epoch; answer: one watcher challenge answered; node: `build_seconds` of the commitment; watch: one `dpor watch --commitments-only --once --all` pass, every response verified.\n\n```\n",
            chrono_date()
        ));
        for r in &rows {
            s.push_str(&r.line());
            s.push('\n');
            for c in r.comments() {
                s.push_str(&c);
                s.push('\n');
            }
        }
        s.push_str("```\n");
        std::fs::write(path, s)?;
    }
    drop(node);
    drop(w);
    drop(tmp);
    Ok(())
}

/// Today's date (UTC), from `date`.
fn chrono_date() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Waits (≤ 120 s) until challenge `q` is answered; fails if it is faulted or stays open.
async fn wait_answered(m: &Market, node: &Node, q: u64) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        match m.get_challenge(q).await?.state {
            ChallengeState::Answered => return Ok(()),
            ChallengeState::Open if Instant::now() < until => tokio::time::sleep(Duration::from_millis(200)).await,
            s => bail!("challenge {q} is {s:?}:\n{}", node.log_text()),
        }
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime");
    let r = rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("signal handler");
        tokio::select! {
            r = run() => r,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
            _ = term.recv() => Err(anyhow::anyhow!("terminated")),
        }
    });
    // run() and everything it owned (anvil, the node) are dropped by now.
    if let Err(e) = r {
        eprintln!("bench-chain: FAILED: {e:#}");
        std::process::exit(1);
    }
}
