//! Shared harness of the end-to-end tests (`tests/e2e_*.rs`, included with
//! `#[path = "e2e_harness/mod.rs"] mod harness;`; a subdirectory, so cargo does not
//! build it as a test of its own).
//!
//! Every test starts REAL processes on loopback only: anvil with the contracts
//! (`dpor_chain::Devnet`, killed on drop), the node binary `dpor-node` (killed on drop
//! by [`NodeProc`]) and the CLI binary `dpor` (`CARGO_BIN_EXE_dpor`, one process per
//! command, as a user would run it).
//!
//! **Finding the node binary.** It is built with the cargo feature `testing` (the
//! cheat modes, `dpor-node run --misbehave`). Cargo sets `CARGO_BIN_EXE_<name>` only for binaries of
//! the package under test (dpor-cli), not for other packages' binaries, and a
//! dev-dependency on `dpor-node` builds its library, never its binary (that would need
//! the unstable artifact dependencies, `-Z bindeps`). So [`node_bin`] asks cargo
//! itself: once per test process it runs `$CARGO build -p dpor-node --bin dpor-node`
//! with the profile the test was built with (the directory of `CARGO_BIN_EXE_dpor` is
//! `debug` → `--profile test`, whose dependencies this very `cargo test` just built,
//! so only the node binary compiles; `release` → `--release`), and takes the path of
//! the executable from cargo's JSON messages, so it does not guess where the target
//! directory is. Cargo has released the build lock by the time tests run. The
//! dev-dependency on dpor-node stays: it makes `cargo test -p dpor-cli` fail to
//! compile, early and clearly, when the node does not build. `DPOR_NODE_BIN`
//! overrides all of this with a given binary: script/test sets it to the node its
//! `cargo test --workspace --features dpor-node/testing` built, so nothing compiles
//! there. The inner cargo runs without the package variables cargo sets for a test
//! process (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, …): build scripts that track them
//! (ring's) would otherwise see them changed and rebuild ring, libp2p and the node.
//!
//! **`DPOR_E2E_HAND_PROVIDER=1`** (off by default): the harness does the provider's
//! chain part itself (registers the node's addresses and accepts each deal with the
//! provider key) for running these tests against a node whose chain agent is not
//! there yet. Normal runs leave all of it to the node, as the tests intend.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use alloy_primitives::{Address, U256};
use dpor_chain::{Devnet, Market, ANVIL_KEYS};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Anvil account of the provider (the node's key).
pub const PROVIDER: usize = 1;
/// Anvil account of the owner.
pub const OWNER: usize = 2;
/// Anvil account of the auditor / challenger.
pub const AUDITOR: usize = 3;

/// β in the tests.
pub const BETA: usize = 4096;

/// 10^18.
pub fn e18(n: u64) -> U256 {
    U256::from(n) * U256::from(10u64).pow(U256::from(18u64))
}

/// The `dpor-node` binary (see the module docs).
pub fn node_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("DPOR_NODE_BIN") {
            return PathBuf::from(p);
        }
        let cli = PathBuf::from(env!("CARGO_BIN_EXE_dpor"));
        let dir = cli.parent().map(Path::to_path_buf).unwrap_or_default();
        let release = dir.file_name().is_some_and(|n| n == "release");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = std::process::Command::new(cargo);
        // Feature `testing`: the node's cheat modes (`--misbehave`), which tests use.
        cmd.args(["build", "-p", "dpor-node", "--bin", "dpor-node", "--features", "testing", "--message-format=json-render-diagnostics"]);
        if release {
            cmd.arg("--release");
        } else {
            cmd.args(["--profile", "test"]);
        }
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if ["CARGO_MANIFEST_", "CARGO_PKG_", "CARGO_CRATE_", "CARGO_BIN_", "CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR"]
                .iter()
                .any(|p| key.starts_with(p))
            {
                cmd.env_remove(key.as_ref());
            }
        }
        cmd.current_dir(env!("CARGO_MANIFEST_DIR")).stdout(Stdio::piped()).stderr(Stdio::inherit());
        eprintln!("e2e: building the node binary: {cmd:?}");
        let out = cmd.output().expect("cannot run cargo to build dpor-node");
        assert!(out.status.success(), "cargo build -p dpor-node failed");
        let exe = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "dpor-node")
            .find_map(|m| m["executable"].as_str().map(PathBuf::from));
        let exe = exe.unwrap_or_else(|| dir.join("dpor-node"));
        assert!(exe.is_file(), "no node binary at {}", exe.display());
        exe
    })
    .clone()
}

/// A child process killed (and reaped) on drop.
pub struct Proc {
    child: Option<std::process::Child>,
    /// What it is, for messages.
    pub name: String,
}

impl Proc {
    /// Takes ownership of a spawned child (killed and reaped on drop).
    pub fn new(child: std::process::Child, name: &str) -> Proc {
        Proc { child: Some(child), name: name.to_string() }
    }

    /// kill -9 now, and reap it.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Longest one `dpor` command of a test may run ([`World::dpor`]): 300 s, far beyond
/// any command's time on a loaded machine (seconds), well within a test's limit.
pub const CLI_LIMIT: Duration = Duration::from_secs(300);

/// What a CLI run printed.
#[derive(Debug)]
pub struct CliRun {
    /// Exit success.
    pub ok: bool,
    /// The first JSON line of stdout (`--json`), or Null.
    pub json: serde_json::Value,
    /// Stdout.
    pub stdout: String,
    /// Stderr.
    pub stderr: String,
}

impl CliRun {
    /// Panics with the output unless the command succeeded; returns the JSON.
    pub fn expect_ok(self, what: &str) -> serde_json::Value {
        assert!(self.ok, "{what} failed:\nstdout: {}\nstderr: {}", self.stdout, self.stderr);
        self.json
    }
}

/// One test's world: a chain with the contracts, a registered node, a work dir.
pub struct World {
    /// The node (dropped first: fields drop in order).
    pub node: Proc,
    /// The node's full multiaddr.
    pub node_addr: String,
    /// The chain.
    pub dev: Devnet,
    /// Files of this test (keys, owner state, node data).
    pub dir: tempfile::TempDir,
    /// The provider account.
    pub provider: Address,
}

impl World {
    /// Starts anvil (automine: a block per transaction; tests mine more with
    /// `dev.mine`) with the contracts, funds the provider and starts the node, which
    /// registers itself; returns once the provider is registered on chain.
    pub async fn start() -> World {
        World::start_with(&[]).await
    }

    /// [`World::start`] with extra `dpor-node run` flags (e.g. `--epoch-commitments`).
    pub async fn start_with(node_args: &[&str]) -> World {
        let started = Instant::now();
        let dev = Devnet::start(None).await.expect("devnet (is `npm install` done?)");
        let dir = tempfile::tempdir().expect("tempdir");
        for (i, k) in ANVIL_KEYS.iter().enumerate().take(5) {
            std::fs::write(dir.path().join(format!("key{i}")), k).expect("key file");
        }
        let provider = dev.key(PROVIDER).address();
        let p = dev.client(PROVIDER).await.expect("provider client");
        p.mint(provider, e18(1_000_000)).await.expect("mint the provider's tokens");
        let a = dev.client(AUDITOR).await.expect("auditor client");
        a.mint(dev.key(AUDITOR).address(), e18(10_000)).await.expect("mint the auditor's tokens");

        let addr_file = dir.path().join("node.addr");
        let log = std::fs::File::create(dir.path().join("node.log")).expect("node log");
        let child = std::process::Command::new(node_bin())
            .args(["run", "--data-dir"])
            .arg(dir.path().join("node"))
            .args(["--listen", "/ip4/127.0.0.1/tcp/0", "--rpc-url", dev.rpc_url(), "--market"])
            .arg(format!("{:?}", dev.market()))
            .arg("--provider-key-file")
            .arg(dir.path().join(format!("key{PROVIDER}")))
            .arg("--addr-file")
            .arg(&addr_file)
            .args(["--poll-interval-ms", "200"])
            .args(node_args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start dpor-node");
        let mut node = Proc { child: Some(child), name: "dpor-node".into() };
        let by_hand = hand_provider();
        let mut world_node_addr = String::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(node.alive(), "the node exited:\n{}", std::fs::read_to_string(dir.path().join("node.log")).unwrap_or_default());
            if world_node_addr.is_empty() {
                if let Ok(s) = std::fs::read_to_string(&addr_file) {
                    world_node_addr = s.trim().to_string();
                }
            }
            if by_hand && !world_node_addr.is_empty() && Instant::now() + Duration::from_secs(50) > deadline {
                p.ensure_allowance(e18(1_000_000)).await.expect("approve");
                match p.register(vec![0], vec![world_node_addr.clone()], 1_000_000_000_000, 2_000_000_000_000, 1 << 24, e18(1000)).await {
                    Ok(_) => break,
                    Err(e) if e.revert_name() == Some("AlreadyRegistered") => break,
                    Err(e) => panic!("register by hand: {e}"),
                }
            }
            if !world_node_addr.is_empty() && p.get_provider(provider).await.map(|p| p.registered).unwrap_or(false) {
                break;
            }
            assert!(Instant::now() < deadline, "the node did not register within 60 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!("e2e: chain + node up in {:.1} s", started.elapsed().as_secs_f64());
        World { node, node_addr: world_node_addr, dev, dir, provider }
    }

    /// A path in the work dir.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `dpor --json ARGS` as anvil account `key` with this world's chain and the
    /// owner state file `owner.json`.
    ///
    /// A command still running after [`CLI_LIMIT`] is killed and the test fails with
    /// its arguments and what it printed so far (a hung command would otherwise show
    /// only as the whole test's `within` limit, with nothing to tell which step hung).
    pub async fn dpor(&self, key: usize, args: &[&str]) -> CliRun {
        use tokio::io::AsyncReadExt;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dpor"))
            .arg("--json")
            .args(args)
            .env("DPOR_RPC_URL", self.dev.rpc_url())
            .env("DPOR_MARKET", format!("{:?}", self.dev.market()))
            .env("DPOR_KEY_FILE", self.path(&format!("key{key}")))
            .env("DPOR_STATE", self.path("owner.json"))
            .env_remove("DPOR_NODE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("run dpor");
        let (mut so, mut se) = (child.stdout.take().expect("stdout"), child.stderr.take().expect("stderr"));
        let out_task = tokio::spawn(async move {
            let mut b = Vec::new();
            let _ = so.read_to_end(&mut b).await;
            b
        });
        let err_task = tokio::spawn(async move {
            let mut b = Vec::new();
            let _ = se.read_to_end(&mut b).await;
            b
        });
        let status = match tokio::time::timeout(CLI_LIMIT, child.wait()).await {
            Ok(s) => s.expect("wait for dpor"),
            Err(_) => {
                let _ = child.kill().await;
                let (o, e) = (out_task.await.unwrap_or_default(), err_task.await.unwrap_or_default());
                panic!(
                    "`dpor {}` still ran after {CLI_LIMIT:?}; killed. stdout so far:\n{}\nstderr so far:\n{}",
                    args.join(" "),
                    String::from_utf8_lossy(&o),
                    String::from_utf8_lossy(&e)
                );
            }
        };
        let out = std::process::Output { status, stdout: out_task.await.unwrap_or_default(), stderr: err_task.await.unwrap_or_default() };
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let json = stdout
            .lines()
            .find(|l| l.trim_start().starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or(serde_json::Value::Null);
        CliRun { ok: out.status.success(), json, stdout, stderr: String::from_utf8_lossy(&out.stderr).to_string() }
    }

    /// `dpor-node erase --data-dir … --deal D ARGS` (the node keeps running).
    pub fn erase(&self, deal: u64, args: &[&str]) -> String {
        let out = std::process::Command::new(node_bin())
            .args(["erase", "--data-dir"])
            .arg(self.path("node"))
            .args(["--deal", &deal.to_string()])
            .args(args)
            .output()
            .expect("run dpor-node erase");
        assert!(out.status.success(), "dpor-node erase failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// The node's log so far (for failure messages).
    pub fn node_log(&self) -> String {
        std::fs::read_to_string(self.path("node.log")).unwrap_or_default()
    }

    /// A chain client as anvil account `i`.
    pub async fn client(&self, i: usize) -> Market {
        self.dev.client(i).await.expect("chain client")
    }

    /// Writes `bytes` deterministic pseudo-random bytes to `name` and returns them.
    pub fn make_file(&self, name: &str, bytes: usize, seed: u64) -> Vec<u8> {
        let data = pseudo_random(bytes, seed);
        std::fs::write(self.path(name), &data).expect("write the test file");
        data
    }

    /// Opens a deal for `file` (λ = `lambda`, 2 samples per epoch, 100 epochs) as the
    /// owner, waits for the node to accept it, uploads and posts digest v1. Returns the
    /// deal id. The owner state is `owner.json`.
    pub async fn open_and_upload(&self, file: &str, lambda: u32) -> u64 {
        self.open_and_upload_in(file, lambda, "owner.json").await
    }

    /// [`World::open_and_upload`] with the owner state in the work dir's file `state`
    /// (one state file per deal).
    pub async fn open_and_upload_in(&self, file: &str, lambda: u32, state: &str) -> u64 {
        let path = self.path(file);
        let path = path.to_str().expect("utf-8 path");
        let state = self.path(state);
        let state = state.to_str().expect("utf-8 path");
        let provider = format!("{:?}", self.provider);
        let lambda = lambda.to_string();
        let open = ["--state", state, "deal", "open", "--provider", &provider, "--file", path, "--lambda", &lambda, "--samples", "2", "--epochs", "100", "--mint"];
        let j = self.dpor(OWNER, &open).await.expect_ok("deal open");
        let deal = j["deal"].as_u64().expect("deal id in the output");
        if hand_provider() {
            tokio::time::sleep(Duration::from_secs(3)).await;
            match self.client(PROVIDER).await.accept_deal(deal).await {
                Ok(_) => {}
                Err(e) if e.revert_name() == Some("WrongDealState") => {} // the node accepted it
                Err(e) => panic!("accept by hand: {e}"),
            }
        }
        self.dpor(OWNER, &["--state", state, "upload", path]).await.expect_ok("upload");
        self.dpor(OWNER, &["--state", state, "checkpoint"]).await.expect_ok("checkpoint v1");
        deal
    }
}

/// The JSON action lines of a `dpor --json watch` run (without the `pass` summary
/// line each pass ends with: it is not an action).
pub fn actions(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("action").is_some_and(|a| a != "pass"))
        .collect()
}

/// Whether the harness stands in for the node's chain agent (see the module docs).
pub fn hand_provider() -> bool {
    std::env::var("DPOR_E2E_HAND_PROVIDER").is_ok_and(|v| v == "1")
}

/// Deterministic bytes (splitmix64).
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        out.extend_from_slice(&z.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Runs `f` with a time limit (a hung process must fail the test, not the CI job).
pub async fn within<F: std::future::Future<Output = T>, T>(secs: u64, f: F) -> T {
    tokio::time::timeout(Duration::from_secs(secs), f).await.unwrap_or_else(|_| panic!("test exceeded {secs} s"))
}
