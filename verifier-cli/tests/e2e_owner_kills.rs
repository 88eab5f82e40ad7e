//! Kill campaigns (issue 10, finding 3). The first is a long series of owner writes with the real
//! `dpor` CLI against a real `dpor-node` process (anvil with the contracts behind it),
//! killing the node — or the CLI — with SIGKILL at chosen moments, restarting the node,
//! and requiring the owner to carry on with the same deal and lose nothing.
//!
//! The moments, taken in turn (a moment that does not occur in a write stays armed for
//! the next ones):
//!
//! - the node right after it commits a write (its answer in flight or not yet sent),
//! - the node while the owner spot-checks the new run,
//! - the node while the owner stores the σ̃ of a new run, and after a C-rebuild,
//! - the node after a pseudo-random delay,
//! - the CLI once its intent is saved (before or just after it sends the write),
//! - the CLI after a pseudo-random delay.
//!
//! After an interrupted write the test runs `dpor status` (which settles the owner's
//! unfinished request with the node) and reads the owner state: the write counts as
//! applied iff the owner's total writes went up by one (and must otherwise be
//! unchanged); the model, a plain array, follows. A write that was not interrupted must
//! succeed (an owner stuck after a crash fails here), and so must the periodic reads
//! and checkpoints. At the end `download` and `extract` must both give the model, byte
//! for byte, and the node and the owner must agree on the state.
//!
//! Against the code before the recovery (`DPOR_CLI_BIN`, `DPOR_NODE_BIN` set to its
//! binaries) this fails at the first kill after a commit: the owner is stuck.
//!
//! The second campaign kills the two other steps whose answer the owner must not lose:
//! the upload's last step and `checkpoint` (see its test's docs).
//!
//! `DPOR_KILLS` sets the number of kills of the first (default 20; the long run is
//! `DPOR_KILLS=100`), `DPOR_KILL_SEED` the pseudo-random seed of both. Readiness is the
//! node's addr file, never a sleep; every process is killed on drop.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e_harness/mod.rs"]
mod harness;

use harness::{node_bin, pseudo_random, within, World, BETA, OWNER, PROVIDER};
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Blocks in the deal (C-rebuild every 16 writes; levels 0..3).
const N: usize = 16;

/// A child process killed (SIGKILL) and reaped on drop.
struct Guard(Option<Child>);

impl Guard {
    fn kill9(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `Some(success)` once it exited.
    fn exited(&mut self) -> Option<bool> {
        match self.0.as_mut().map(|c| c.try_wait()) {
            Some(Ok(Some(status))) => Some(status.success()),
            Some(Ok(None)) => None,
            _ => Some(false),
        }
    }

    fn wait(&mut self) -> bool {
        match self.0.take() {
            Some(mut c) => c.wait().map(|s| s.success()).unwrap_or(false),
            None => false,
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.kill9();
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Moment {
    NodeAfterCommit,
    NodeDuringSpotCheck,
    NodeDuringSealedStore,
    NodeDuringSealedStoreAfterCRebuild,
    NodeRandom,
    CliAfterIntent,
    CliRandom,
    /// The node once it has committed an upload's last step (`upload finished`).
    NodeAfterUploadCommit,
    /// The CLI once its intent to finish an upload is saved.
    CliAfterUploadIntent,
    /// The node once it has co-signed a checkpoint's digest (its answer in flight).
    NodeAfterCosign,
    /// The CLI once the node has co-signed (the digest posted or not).
    CliAfterCosign,
}

impl Moment {
    /// Whether this moment kills the CLI (otherwise the node).
    fn kills_cli(self) -> bool {
        matches!(self, Moment::CliAfterIntent | Moment::CliRandom | Moment::CliAfterUploadIntent | Moment::CliAfterCosign)
    }
}

const MOMENTS: [Moment; 7] = [
    Moment::NodeAfterCommit,
    Moment::NodeDuringSpotCheck,
    Moment::NodeDuringSealedStore,
    Moment::NodeDuringSealedStoreAfterCRebuild,
    Moment::NodeRandom,
    Moment::CliAfterIntent,
    Moment::CliRandom,
];

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The node's log, read incrementally.
struct Log {
    path: PathBuf,
    offset: u64,
}

impl Log {
    /// Text appended since the last call.
    fn new_text(&mut self) -> String {
        let mut f = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(_) => return String::new(),
        };
        let _ = f.seek(SeekFrom::Start(self.offset));
        let mut buf = Vec::new();
        let _ = f.read_to_end(&mut buf);
        self.offset += buf.len() as u64;
        String::from_utf8_lossy(&buf).into_owned()
    }
}

struct Campaign {
    world: World,
    node: Guard,
    addr: String,
    restarts: usize,
    /// The owner's state file (in the world's folder): one per deal.
    state: String,
}

impl Campaign {
    /// A campaign over `world`; the world's own node is stopped (the campaign starts
    /// and restarts its node itself, on a fresh port each time).
    fn new(mut world: World) -> Self {
        world.node.kill9();
        Campaign { world, node: Guard(None), addr: String::new(), restarts: 0, state: "owner.json".into() }
    }

    /// Starts the node, opens a deal (λ = 16, K = 2, cache of level 0) for a
    /// pseudo-random file of N blocks from `seed`, uploads it (which waits for the
    /// node's chain agent to accept the deal) and posts its first digest. Returns the
    /// file: the model the campaign keeps.
    fn start_with_deal(&mut self, seed: u64) -> Vec<u8> {
        self.start_node();
        let model = pseudo_random(N * BETA, seed);
        let file = self.world.path("file");
        std::fs::write(&file, &model).unwrap();
        let file = file.to_str().unwrap();
        let provider = format!("{:?}", self.world.provider);
        self.cli_ok(&["deal", "open", "--provider", &provider, "--file", file, "--lambda", "16", "--samples", "2", "--epochs", "100", "--mint", "--cache-levels", "1"]);
        self.cli_ok(&["upload", file]);
        self.cli_ok(&["checkpoint"]);
        model
    }

    /// Writes `data` to block `index` with `dpor write` (no kill) and into `model`.
    fn write_block(&self, model: &mut [u8], index: usize, data: &[u8]) {
        let blk = self.world.path("blk");
        std::fs::write(&blk, data).unwrap();
        self.cli_ok(&["write", &index.to_string(), blk.to_str().unwrap()]);
        model[index * BETA..(index + 1) * BETA].copy_from_slice(data);
    }

    /// Starts the node (again) on a fresh port and waits until its addr file is written.
    fn start_node(&mut self) {
        self.start_node_with(&[]);
    }

    /// As [`Campaign::start_node`], with further arguments (a `--misbehave` mode).
    fn start_node_with(&mut self, extra: &[&str]) {
        let addr_file = self.world.path("kill-node.addr");
        let _ = std::fs::remove_file(&addr_file);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.world.path("kill-node.log")).expect("node log");
        let child = Command::new(node_bin())
            .args(["run", "--data-dir"])
            .arg(self.world.path("node"))
            .args(["--listen", "/ip4/127.0.0.1/tcp/0", "--rpc-url", self.world.dev.rpc_url(), "--market"])
            .arg(format!("{:?}", self.world.dev.market()))
            .arg("--provider-key-file")
            .arg(self.world.path(&format!("key{PROVIDER}")))
            .arg("--addr-file")
            .arg(&addr_file)
            .args(["--poll-interval-ms", "200"])
            .args(extra)
            .env("RUST_LOG", "info,libp2p=warn,dpor_node::handler=trace")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start dpor-node");
        self.node = Guard(Some(child));
        // Readiness: the addr file, written once the node listens (a whole line).
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(ok) = self.node.exited() {
                panic!("the node exited ({ok}) on restart {}:\n{}", self.restarts, self.log_tail());
            }
            if let Ok(s) = std::fs::read_to_string(&addr_file) {
                if s.ends_with('\n') && !s.trim().is_empty() {
                    self.addr = s.trim().to_string();
                    break;
                }
            }
            assert!(Instant::now() < deadline, "the node did not start listening on restart {}", self.restarts);
            std::thread::sleep(Duration::from_millis(10));
        }
        self.restarts += 1;
    }

    fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(self.world.path("kill-node.log")).unwrap_or_default();
        s.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    fn cli_command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(cli_bin());
        c.arg("--json")
            .args(["--node", &self.addr])
            .args(args)
            .env("DPOR_RPC_URL", self.world.dev.rpc_url())
            .env("DPOR_MARKET", format!("{:?}", self.world.dev.market()))
            .env("DPOR_KEY_FILE", self.world.path(&format!("key{OWNER}")))
            .env("DPOR_STATE", self.world.path(&self.state))
            .env_remove("DPOR_NODE")
            .stdin(Stdio::null());
        c
    }

    /// Runs a CLI command to the end (no kills): (success, stdout, stderr).
    ///
    /// A command still running after [`harness::CLI_LIMIT`] is killed and the test
    /// fails with its arguments, what it printed and the node's log, as
    /// `World::dpor` does (the campaigns run in `block_in_place`, where the test's
    /// `within` limit cannot fire, so a hung command would otherwise hang the job).
    fn cli(&self, args: &[&str]) -> (bool, String, String) {
        let mut child = self.cli_command(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run dpor");
        let (out, err) = (drain(child.stdout.take()), drain(child.stderr.take()));
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for dpor") {
                break status;
            }
            if started.elapsed() > harness::CLI_LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "`dpor {}` still ran after {:?}; killed. stdout so far:\n{}\nstderr so far:\n{}\nnode log:\n{}",
                    args.join(" "),
                    harness::CLI_LIMIT,
                    out.join().unwrap_or_default(),
                    err.join().unwrap_or_default(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (status.success(), out.join().unwrap_or_default(), err.join().unwrap_or_default())
    }

    fn cli_ok(&self, args: &[&str]) -> serde_json::Value {
        let (ok, out, err) = self.cli(args);
        assert!(ok, "dpor {args:?} failed (the owner is stuck?):\nstdout: {out}\nstderr: {err}\nnode log:\n{}", self.log_tail());
        out.lines().find_map(|l| serde_json::from_str(l).ok()).unwrap_or(serde_json::Value::Null)
    }

    /// Nothing lost: the whole file, downloaded and extracted, equals `model`.
    fn assert_whole(&self, model: &[u8]) {
        let out = self.world.path("download.out");
        let j = self.cli_ok(&["download", out.to_str().unwrap()]);
        assert!(j["fallback"].is_null(), "download fell back to extraction (U failed): {j}");
        assert!(std::fs::read(&out).unwrap() == model, "download differs from the model");
        let out = self.world.path("extract.out");
        self.cli_ok(&["extract", out.to_str().unwrap()]);
        assert!(std::fs::read(&out).unwrap() == model, "extract differs from the model");
    }

    /// A public audit (`dpor audit`) of epoch 0, once the chain's clock is past its
    /// start (its seed exists then), must pass against the owner's last posted digest.
    /// Called from blocking code inside the test's runtime (`block_in_place`).
    fn assert_audit_passes(&self) {
        let deal_id = self.owner_state()["deal"].as_u64().unwrap();
        tokio::runtime::Handle::current().block_on(async {
            let start = self.world.client(OWNER).await.epoch_window(deal_id, 0).await.expect("epoch window").start;
            self.world.dev.warp_to(start).await.expect("warp");
        });
        let audit = self.cli_ok(&["audit", &deal_id.to_string()]);
        assert_eq!(audit["passed"], true, "{audit}");
        assert_eq!(audit["version"], self.owner_state()["digest_version"], "the audit did not use the owner's last digest: {audit}");
    }

    fn owner_state(&self) -> serde_json::Value {
        let text = dpor_client::owner_state::read_json(&self.world.path(&self.state)).expect("owner state");
        serde_json::from_str(&text).expect("owner state JSON")
    }

    fn total_writes(&self) -> u64 {
        let s = self.owner_state();
        s["rebuild_count"].as_u64().unwrap() * N as u64 + s["write_count"].as_u64().unwrap()
    }
}

/// Reads `r` to its end on a thread of its own (a child's output, so that it never
/// blocks on a full pipe): the text, lossily decoded.
fn drain<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut b);
        }
        String::from_utf8_lossy(&b).into_owned()
    })
}

/// The campaigns' pseudo-random seed: `DPOR_KILL_SEED`, else a fixed one.
fn kill_seed() -> u64 {
    std::env::var("DPOR_KILL_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5eed)
}

/// The CLI under test: this package's `dpor`, or `DPOR_CLI_BIN` (with `DPOR_NODE_BIN`,
/// to run the campaign against other builds, e.g. the code before the recovery).
fn cli_bin() -> PathBuf {
    std::env::var_os("DPOR_CLI_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_dpor")))
}

/// What happened in one attempt.
struct Attempt {
    killed: bool,
    cli_ok: bool,
}

/// Runs `dpor ARGS` (a write, an upload, a checkpoint), killing at `moment` if it
/// occurs (the node is started again); returns whether a kill happened and whether
/// the CLI succeeded.
fn attempt(c: &mut Campaign, log: &mut Log, args: &[&str], moment: Moment, delay: Duration) -> Attempt {
    let _ = log.new_text();
    let out = std::fs::File::create(c.world.path("cli.out")).expect("cli out");
    let err = std::fs::File::create(c.world.path("cli.err")).expect("cli err");
    let child = c.cli_command(args).stdout(out).stderr(err).spawn().expect("run dpor");
    let mut cli = Guard(Some(child));
    let started = Instant::now();
    let mut seen = String::new();
    let state_path = c.world.path(&c.state);
    let mut killed = false;
    loop {
        if cli.exited().is_some() {
            break;
        }
        seen.push_str(&log.new_text());
        // A single write logs "write applied", a batch "write batch applied".
        let after_commit = seen.find("write applied").or_else(|| seen.find("write batch applied")).map(|i| &seen[i..]);
        let fire = match moment {
            Moment::NodeAfterCommit => after_commit.is_some(),
            Moment::NodeDuringSpotCheck => after_commit.is_some_and(|s| s.contains("\"samples\"")),
            Moment::NodeDuringSealedStore => after_commit.is_some_and(|s| s.contains("store-sealed")),
            Moment::NodeDuringSealedStoreAfterCRebuild => {
                after_commit.is_some_and(|s| s.lines().next().is_some_and(|l| l.contains("C@")) && s.contains("store-sealed"))
            }
            Moment::NodeRandom | Moment::CliRandom => started.elapsed() >= delay,
            // A single write's intent ("write") or a batch's ("write_batch").
            Moment::CliAfterIntent => dpor_client::owner_state::read_json(&state_path).is_ok_and(|s| s.contains("\"kind\": \"write")),
            Moment::NodeAfterUploadCommit => seen.contains("upload finished"),
            Moment::CliAfterUploadIntent => {
                dpor_client::owner_state::read_json(&state_path).is_ok_and(|s| s.contains("\"kind\": \"upload_finish\""))
            }
            Moment::NodeAfterCosign | Moment::CliAfterCosign => seen.contains("co-signed digest"),
        };
        if fire {
            if moment.kills_cli() {
                cli.kill9();
            } else {
                c.node.kill9();
            }
            killed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let cli_ok = cli.wait();
    if killed && !moment.kills_cli() {
        c.start_node();
    }
    Attempt { killed, cli_ok }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_carries_on_after_kill_9_of_node_or_cli_at_any_moment() {
    let kills: usize = std::env::var("DPOR_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let seed = kill_seed();
    eprintln!("kill campaign: {kills} kills, seed {seed}");
    within(300 + 30 * kills as u64, async move {
        let mut c = Campaign::new(World::start().await);
        tokio::task::block_in_place(|| run_campaign(&mut c, kills, seed));
    })
    .await;
}

fn run_campaign(c: &mut Campaign, kills: usize, seed: u64) {
    let mut rng = Rng(seed);
    let mut model = c.start_with_deal(seed ^ 7);

    let mut log = Log { path: c.world.path("kill-node.log"), offset: 0 };
    let mut done = 0usize;
    let mut by_moment = vec![0usize; MOMENTS.len()];
    let mut armed = 0usize;
    let mut armed_for = 0usize;
    let mut recovered_applied = 0usize;
    let mut recovered_not_applied = 0usize;
    let mut attempts = 0usize;
    let mut typical = Duration::from_millis(300);
    let mut batches = 0usize;
    let blk = c.world.path("blk");
    let blk = blk.to_str().unwrap().to_string();
    while done < kills {
        attempts += 1;
        // One write in four is a batch (`dpor write I1 F1 I2 F2 …`) of 2..=N + 4
        // writes, so batches cross C-rebuilds and single writes follow them.
        let count = if rng.below(4) == 0 { 2 + rng.below(N as u64 + 3) as usize } else { 1 };
        let mut writes = Vec::with_capacity(count);
        let mut args = vec!["write".to_string()];
        for j in 0..count {
            let index = rng.below(N as u64) as usize;
            let len = 1 + rng.below(BETA as u64) as usize;
            let data = pseudo_random(len, rng.next());
            let f = if count == 1 { blk.clone() } else { format!("{blk}-{j}") };
            std::fs::write(&f, &data).unwrap();
            args.extend([index.to_string(), f]);
            writes.push((index, data));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let moment = MOMENTS[armed];
        let delay = Duration::from_micros(rng.below(typical.as_micros() as u64 + 1));
        let before = c.total_writes();
        let t = Instant::now();
        let a = attempt(c, &mut log, &args, moment, delay);
        if !a.killed {
            assert!(a.cli_ok, "write {attempts} failed without any kill (the owner is stuck):\n{}\n{}\nnode log:\n{}",
                std::fs::read_to_string(c.world.path("cli.out")).unwrap_or_default(),
                std::fs::read_to_string(c.world.path("cli.err")).unwrap_or_default(),
                c.log_tail());
            typical = (typical + t.elapsed()) / 2;
        }
        let applied = if a.cli_ok {
            true
        } else {
            // Any command settles the unfinished request first; `status` reports it.
            c.cli_ok(&["status"]);
            let s = c.owner_state();
            assert!(s.get("pending").is_none_or(|p| p.is_null()), "the owner's request is still unsettled after `status`: {s}");
            let after = c.total_writes();
            assert!(after == before || after == before + count as u64, "total writes went from {before} to {after} ({count} sent)");
            let applied = after == before + count as u64;
            if applied {
                recovered_applied += 1;
            } else {
                recovered_not_applied += 1;
            }
            applied
        };
        assert_eq!(c.total_writes(), before + if applied { count as u64 } else { 0 }, "attempt {attempts}");
        if applied {
            for (index, data) in &writes {
                let block = &mut model[index * BETA..(index + 1) * BETA];
                block.fill(0);
                block[..data.len()].copy_from_slice(data);
            }
            batches += (count > 1) as usize;
        }
        armed_for += 1;
        if a.killed {
            by_moment[armed] += 1;
            done += 1;
            armed = (armed + 1) % MOMENTS.len();
            armed_for = 0;
        } else if armed_for > 3 * N {
            // This moment did not occur in 3N writes (cannot happen for these moments: a
            // C-rebuild comes every N writes); move on rather than loop.
            armed = (armed + 1) % MOMENTS.len();
            armed_for = 0;
        }
        if attempts.is_multiple_of(7) {
            let i = rng.below(N as u64) as usize;
            let out = c.world.path("read.out");
            c.cli_ok(&["read", &i.to_string(), "--out", out.to_str().unwrap()]);
            assert_eq!(std::fs::read(&out).unwrap(), model[i * BETA..(i + 1) * BETA], "block {i} after attempt {attempts}");
        }
        if attempts.is_multiple_of(20) {
            c.cli_ok(&["checkpoint"]);
        }
    }
    eprintln!(
        "kill campaign: {attempts} writes ({batches} of them batches applied), {done} kills {:?}, {} node restarts; interrupted writes settled as applied {recovered_applied}, not applied {recovered_not_applied}",
        MOMENTS.iter().zip(&by_moment).collect::<Vec<_>>(),
        c.restarts - 1
    );
    if kills >= MOMENTS.len() {
        for (m, n) in MOMENTS.iter().zip(&by_moment) {
            assert!(*n > 0, "no kill at moment {m:?}");
        }
        // A CLI killed after saving its intent always leaves a write to settle.
        assert!(recovered_applied > 0, "no interrupted write was settled as applied");
        assert!(batches > 0, "no batch of writes was applied");
    }

    // Nothing lost: the whole file, both ways, equals the model.
    c.assert_whole(&model);
    let s = c.cli_ok(&["status"]);
    assert_eq!(s["node"]["write_count"], s["write_count"], "node and owner disagree: {s}");
    assert_eq!(s["node"]["root_u"], s["root_u"], "node and owner disagree: {s}");
    c.cli_ok(&["checkpoint"]);
}

/// The two owner steps the write campaign does not reach (docs/OPERATIONS.md): the
/// upload's last step and `checkpoint`, each killed (node or CLI, SIGKILL) at the
/// moments where a lost answer matters.
///
/// - Upload: one deal per moment (an upload happens once per deal): the CLI at a
///   pseudo-random delay, the CLI once its finish intent is saved, the node once it has
///   committed the upload, the node at a pseudo-random delay. After the kill `dpor
///   status` settles the intent; if the upload was not applied, `dpor upload` runs
///   again and must succeed. Then the downloaded file must equal the uploaded one.
/// - Checkpoint: rounds of one write then a `checkpoint` killed at a moment (the node
///   or the CLI once the node has co-signed, either at a pseudo-random delay). The next
///   `checkpoint` must succeed and the chain's digest version must equal the owner's.
///   Then a node that surely loses its co-signature's answer (`--misbehave
///   lose-cosign-answers`): the next checkpoint, against an honest node, must post the
///   version after the one the node signed. At the end a public audit (which checks
///   the node's runs against the on-chain digest) must pass and the file must be whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_and_checkpoint_carry_on_after_kill_9() {
    let seed = kill_seed();
    within(900, async move {
        let mut c = Campaign::new(World::start().await);
        tokio::task::block_in_place(|| upload_and_checkpoint_campaign(&mut c, seed));
    })
    .await;
}

fn upload_and_checkpoint_campaign(c: &mut Campaign, seed: u64) {
    c.start_node();
    let mut rng = Rng(seed);
    let mut log = Log { path: c.world.path("kill-node.log"), offset: 0 };
    let provider = format!("{:?}", c.world.provider);
    // Opens a deal and waits until the node's chain agent accepted it, so that the
    // kills land in the upload itself (a node killed before accepting makes `upload`
    // wait a minute for an acceptance that never comes).
    let open = |c: &Campaign, file: &str| {
        c.cli_ok(&["deal", "open", "--provider", &provider, "--file", file, "--lambda", "16", "--samples", "2", "--epochs", "100", "--mint", "--cache-levels", "1"]);
        let deadline = Instant::now() + Duration::from_secs(120);
        while c.cli_ok(&["status"])["chain_state"] != "Active" {
            assert!(Instant::now() < deadline, "the node did not accept the deal:\n{}", c.log_tail());
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    // Upload: a first deal without a kill gives the typical duration.
    let mut typical = Duration::from_millis(300);
    let moments = [None, Some(Moment::CliRandom), Some(Moment::CliAfterUploadIntent), Some(Moment::NodeAfterUploadCommit), Some(Moment::NodeRandom)];
    let mut model = Vec::new();
    let mut killed_uploads = 0;
    for (k, moment) in moments.into_iter().enumerate() {
        c.state = format!("owner-{k}.json");
        model = pseudo_random(N * BETA, rng.next());
        let file = c.world.path(&format!("file-{k}"));
        std::fs::write(&file, &model).unwrap();
        let file = file.to_str().unwrap().to_string();
        open(c, &file);
        let t = Instant::now();
        let a = match moment {
            None => Attempt { killed: false, cli_ok: c.cli(&["upload", &file]).0 },
            Some(m) => attempt(c, &mut log, &["upload", &file], m, Duration::from_micros(rng.below(typical.as_micros() as u64 + 1))),
        };
        if !a.killed {
            assert!(a.cli_ok, "upload {k} ({moment:?}) failed without a kill:\n{}\nnode log:\n{}",
                std::fs::read_to_string(c.world.path("cli.err")).unwrap_or_default(), c.log_tail());
            typical = t.elapsed();
        } else {
            killed_uploads += 1;
        }
        if !a.cli_ok {
            c.cli_ok(&["status"]);
            let s = c.owner_state();
            assert!(s.get("pending").is_none_or(|p| p.is_null()), "upload {k}: the intent is still unsettled after `status`: {s}");
            if s["uploaded"] != true {
                c.cli_ok(&["upload", &file]);
            }
        }
        let out = c.world.path("download.out");
        let j = c.cli_ok(&["download", out.to_str().unwrap()]);
        assert!(j["fallback"].is_null(), "upload {k}: download fell back to extraction (U failed): {j}");
        assert!(std::fs::read(&out).unwrap() == model, "upload {k} ({moment:?}): download differs from the file");
        c.cli_ok(&["checkpoint"]);
    }
    assert!(killed_uploads >= 2, "only {killed_uploads} uploads were killed (the moments after the intent always occur)");

    // Checkpoints, on the last deal.
    let moments = [Moment::NodeAfterCosign, Moment::CliAfterCosign, Moment::CliRandom, Moment::NodeRandom];
    let mut typical = Duration::from_millis(300);
    let mut killed_checkpoints = 0;
    for round in 0..2 * moments.len() {
        c.write_block(&mut model, rng.below(N as u64) as usize, &pseudo_random(BETA, rng.next()));
        let moment = moments[round % moments.len()];
        let t = Instant::now();
        let a = attempt(c, &mut log, &["checkpoint"], moment, Duration::from_micros(rng.below(typical.as_micros() as u64 + 1)));
        if a.killed {
            killed_checkpoints += 1;
        } else {
            assert!(a.cli_ok, "checkpoint {round} failed without a kill:\n{}\nnode log:\n{}",
                std::fs::read_to_string(c.world.path("cli.err")).unwrap_or_default(), c.log_tail());
            typical = t.elapsed();
        }
        let posted = c.cli_ok(&["checkpoint"]);
        let s = c.cli_ok(&["status"]);
        assert_eq!(s["chain_digest_version"], posted["version"], "round {round} ({moment:?}): chain and owner disagree: {s}");
        assert_eq!(s["digest_version"], posted["version"], "round {round} ({moment:?}): {s}");
    }
    assert!(killed_checkpoints >= moments.len(), "only {killed_checkpoints} checkpoints were killed");

    // A co-signature whose answer is surely lost (the node in `lose-cosign-answers`
    // mode): the node has signed version v, which the owner never received; the
    // node will not sign v again, so the next checkpoint must take v + 1.
    let v = c.owner_state()["digest_version"].as_u64().unwrap() + 1;
    // First the node sees v − 1 posted (its agent's log scan): else v − 1 could still
    // wait beside v after the restart, and the node would post v itself.
    let t0 = Instant::now();
    while c.cli_ok(&["status"])["node"]["posted_version"] != v - 1 {
        assert!(t0.elapsed() < Duration::from_secs(120), "the node did not see v{} posted:\n{}", v - 1, c.log_tail());
        std::thread::sleep(Duration::from_millis(200));
    }
    c.node.kill9();
    c.start_node_with(&["--misbehave", "lose-cosign-answers"]);
    c.write_block(&mut model, rng.below(N as u64) as usize, &pseudo_random(BETA, rng.next()));
    let (ok, out, err) = c.cli(&["checkpoint"]);
    assert!(!ok, "the checkpoint got a signature the node lost:\n{out}\n{err}");
    let s = c.cli_ok(&["status"]);
    assert_eq!(s["node"]["cosigned_version"], v, "{s}");
    assert_eq!(s["chain_digest_version"], v - 1, "{s}");
    c.node.kill9();
    c.start_node();
    let posted = c.cli_ok(&["checkpoint"]);
    assert_eq!(posted["version"], v + 1, "the checkpoint after a lost co-signature: {posted}");
    let s = c.cli_ok(&["status"]);
    assert_eq!(s["chain_digest_version"], v + 1, "{s}");
    eprintln!("upload/checkpoint campaign: {killed_uploads} uploads and {killed_checkpoints} checkpoints killed, {} node restarts", c.restarts - 1);

    c.assert_audit_passes();
    c.assert_whole(&model);
}

/// One step of [`mixed_writes_campaign`]: `dpor write I F` (one block) or `dpor write
/// I1 F1 I2 F2 …` (a batch of this many writes).
#[derive(Clone, Copy, Debug)]
enum Step {
    Single,
    Batch(usize),
}

/// A batch that crosses a C-rebuild leaves C unchecked until the next checkpoint; a
/// single-block write after it once left the owner's C snapshot behind, and the
/// checkpoint then accused the honest node (C failing every sample), saved the
/// failure and refused every later checkpoint, resize and secret audit. Here the
/// sequence and its neighbours (batch then batch, singles then batch), each without
/// and with a kill -9 of the node once it has committed the second step, then `dpor
/// checkpoint`, which must pass; at the end a public audit of the last digest, a
/// download and an extraction must all give the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_and_single_writes_across_c_rebuilds_then_checkpoint_with_and_without_kills() {
    let seed = kill_seed();
    within(900, async move {
        let mut c = Campaign::new(World::start().await);
        tokio::task::block_in_place(|| mixed_writes_campaign(&mut c, seed));
    })
    .await;
}

fn mixed_writes_campaign(c: &mut Campaign, seed: u64) {
    use Step::*;
    let mut rng = Rng(seed ^ 0xba7c);
    let mut model = c.start_with_deal(seed ^ 11);
    let mut log = Log { path: c.world.path("kill-node.log"), offset: 0 };
    // N = 16: a batch of 17 or more writes always crosses a C-rebuild.
    let sequences: [&[Step]; 4] = [
        &[Batch(N + 1), Single],
        &[Batch(N + 3), Batch(3)],
        &[Single, Single, Batch(N + 1)],
        &[Batch(N + 2), Single, Batch(2), Single],
    ];
    let mut kills = 0;
    for kill in [false, true] {
        for steps in sequences {
            for (k, step) in steps.iter().enumerate() {
                let count = match step {
                    Single => 1,
                    Batch(n) => *n,
                };
                let mut args = vec!["write".to_string()];
                let mut writes = Vec::with_capacity(count);
                for j in 0..count {
                    let index = rng.below(N as u64) as usize;
                    let data = pseudo_random(1 + rng.below(BETA as u64) as usize, rng.next());
                    let f = c.world.path(&format!("mixed-{j}"));
                    std::fs::write(&f, &data).unwrap();
                    args.extend([index.to_string(), f.to_str().unwrap().to_string()]);
                    writes.push((index, data));
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let before = c.total_writes();
                // The node is killed once it has committed the step after the first.
                if kill && k == 1 {
                    let a = attempt(c, &mut log, &args, Moment::NodeAfterCommit, Duration::ZERO);
                    assert!(a.killed, "{steps:?}: the node was not killed after committing step {k}");
                    kills += 1;
                    c.cli_ok(&["status"]);
                    let after = c.total_writes();
                    assert!(after == before || after == before + count as u64, "{steps:?}: total writes went from {before} to {after}");
                    if after == before {
                        c.cli_ok(&args);
                    }
                } else {
                    c.cli_ok(&args);
                }
                assert_eq!(c.total_writes(), before + count as u64, "{steps:?} step {k}");
                for (index, data) in &writes {
                    let block = &mut model[index * BETA..(index + 1) * BETA];
                    block.fill(0);
                    block[..data.len()].copy_from_slice(data);
                }
            }
            // The checkpoint checks every run the batches built (C included) and must
            // pass against this honest node.
            let (ok, out, err) = c.cli(&["checkpoint"]);
            assert!(ok, "{steps:?} (kill: {kill}): the checkpoint accuses the honest node:\n{out}\n{err}\nnode log:\n{}", c.log_tail());
            let s = c.cli_ok(&["status"]);
            assert_eq!(s["chain_digest_version"], s["digest_version"], "{steps:?}: {s}");
            assert_eq!(s["node"]["root_u"], s["root_u"], "{steps:?}: {s}");
        }
    }
    eprintln!("mixed writes: {} sequences, {kills} node kills, {} node restarts", 2 * sequences.len(), c.restarts - 1);
    c.assert_audit_passes();
    c.assert_whole(&model);
}
