//! A throw-away local chain for tests (feature `devnet`): anvil (the real binary of the
//! npm package, [`foundry_binary`]) on a loopback port the kernel picks with the contracts deployed by `contracts/script/Deploy.s.sol`
//! (through `forge script`, as `script/test-cast` does). Killed when dropped.
//!
//! The repository root is `$DPOR_ROOT` if set, else the parent of this crate's
//! manifest directory. Needs `npm install` (Foundry's anvil and forge, see [`foundry_binary`]).

use crate::client::{rpc_err, Market};
use crate::error::ChainError;
use crate::keys::{parse_key, ANVIL_KEYS};
use alloy::providers::{Provider, ProviderBuilder};
use alloy::signers::local::PrivateKeySigner;
use alloy_primitives::{Address, U256};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Deployment parameters of a [`Devnet`] (Deploy.s.sol's environment; `None` keeps its
/// default). Durations are seconds and have floors in the contract (epoch 6 h, answer
/// 15 h, grace and upload 1 day): tests warp time ([`Devnet::increase_time`],
/// [`Devnet::warp_to`]) instead of shrinking them.
#[derive(Debug, Clone, Default)]
pub struct DevnetOptions {
    /// Seconds between blocks (fractions such as 0.5 work with anvil 1.7.1); `None`
    /// mines one block per transaction (automine).
    pub block_time: Option<Duration>,
    /// `EPOCH_SECONDS` (default 86400).
    pub epoch_seconds: Option<u64>,
    /// `ANSWER_SECONDS` (default 86400).
    pub answer_seconds: Option<u64>,
    /// `GRACE_SECONDS` (default 172800).
    pub grace_seconds: Option<u64>,
    /// `UPLOAD_SECONDS` (default 86400).
    pub upload_seconds: Option<u64>,
    /// `EXIT_NOTICE_EPOCHS` (default 7).
    pub exit_notice_epochs: Option<u32>,
    /// `DISPUTE_BOND` in wei (default 100e18).
    pub dispute_bond: Option<U256>,
    /// `MAX_FAILURES` (default 3).
    pub max_failures: Option<u64>,
    /// `MIN_STAKE` in wei (default 1000e18).
    pub min_stake: Option<U256>,
    /// `BEACON`: the randomness beacon the market reads seeds from (default none = dev
    /// seeds from blockhash). See [`Devnet::start_with_beacon`] to deploy a local one.
    pub beacon: Option<Address>,
    /// Anvil's chain id (`--chain-id`; default anvil's 31337). Deploy.s.sol refuses dev
    /// seeds and its default key on a chain id that is not a local one.
    pub chain_id: Option<u64>,
    /// The genesis block's timestamp (`--timestamp`; default now): a chain whose clock
    /// runs at some other time, e.g. when recorded beacon rounds were emitted.
    pub genesis_timestamp: Option<u64>,
}

/// The environment variables Deploy.s.sol reads ([`Devnet::forge_script_deploy`] clears
/// every one it is not given, so a developer's shell cannot change a test's deployment).
pub const DEPLOY_ENV: [&str; 15] = [
    "DPOR_DEPLOY_CONFIG",
    "DPOR_DEPLOY_OUT",
    "DEPLOYER_KEY",
    "TOKEN",
    "BEACON",
    "EPOCH_SECONDS",
    "ANSWER_SECONDS",
    "GRACE_SECONDS",
    "UPLOAD_SECONDS",
    "EXIT_NOTICE_EPOCHS",
    "DISPUTE_BOND",
    "CHALLENGER_SHARE_BPS",
    "MAX_FAILURES",
    "MIN_STAKE",
    "FOUNDRY_CONFIG",
];

/// What a `forge script` run of Deploy.s.sol returned ([`Devnet::forge_script_deploy`]).
#[derive(Debug, Clone)]
pub struct ScriptRun {
    /// Whether forge exited 0.
    pub ok: bool,
    /// Its stdout and stderr, one after the other.
    pub output: String,
}

/// A running anvil with the token and market deployed. Anvil is killed on drop.
pub struct Devnet {
    child: Child,
    rpc_url: String,
    market: Address,
    token: Address,
    manifest: Address,
    chain_id: u64,
    deploy_block: u64,
}

/// One `forge script` at a time per process: concurrent runs share `contracts/cache`,
/// `contracts/out` and `broadcast/`.
static DEPLOY_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl Devnet {
    /// Starts anvil (automine, or one block every `block_time`) and deploys with the
    /// default parameters (1-day epochs, dev seeds).
    ///
    /// Errors: [`ChainError::Rpc`] if anvil or forge is missing, does not start, or
    /// the deploy output lacks the addresses.
    pub async fn start(block_time: Option<Duration>) -> Result<Devnet, ChainError> {
        Self::start_with(DevnetOptions { block_time, ..Default::default() }).await
    }

    /// Starts anvil and deploys with `opts`.
    pub async fn start_with(opts: DevnetOptions) -> Result<Devnet, ChainError> {
        let root = repo_root();
        let mut dev = Self::spawn_anvil(&root, &opts).await?;
        dev.deploy(&opts).await?;
        Ok(dev)
    }

    /// Starts the real anvil binary ([`foundry_binary`]) on a loopback port the kernel picks, in its
    /// own process group (so that drop ends the whole group, anything anvil started
    /// included), and waits until it answers. Nothing is deployed yet.
    async fn spawn_anvil(root: &Path, opts: &DevnetOptions) -> Result<Devnet, ChainError> {
        let err = |m: String| ChainError::Rpc { method: "devnet", message: m };
        let anvil = foundry_binary(root, "anvil")?;
        let mut cmd = Command::new(&anvil);
        // Port 0: anvil binds a port the kernel picks and prints it ("Listening on
        // 127.0.0.1:PORT"). A port found free beforehand could be taken by another
        // test's anvil or node starting at the same time, and then this anvil would
        // exit while the other one answered in its place.
        cmd.args(["--host", "127.0.0.1", "--port", "0"]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
        if let Some(bt) = opts.block_time {
            cmd.args(["--block-time", &format!("{}", bt.as_secs_f64())]);
        }
        if let Some(id) = opts.chain_id {
            cmd.args(["--chain-id", &id.to_string()]);
        }
        if let Some(t) = opts.genesis_timestamp {
            cmd.args(["--timestamp", &t.to_string()]);
        }
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().map_err(|e| err(format!("cannot start {}: {e} (run `npm install`)", anvil.display())))?;
        let stdout = child.stdout.take();
        // From here on, an error drops `dev`, which ends anvil's process group.
        let mut dev =
            Devnet { child, rpc_url: String::new(), market: Address::ZERO, token: Address::ZERO, manifest: Address::ZERO, chain_id: 0, deploy_block: 0 };
        let stdout = stdout.ok_or_else(|| err("anvil's output was not piped".into()))?;
        let port = match tokio::time::timeout(ANVIL_START_WAIT, listening_port(stdout)).await {
            Ok(Ok(port)) => port,
            Ok(Err(())) => return Err(err(format!("anvil exited before it listened: {:?}", dev.child.try_wait()))),
            Err(_) => return Err(err(format!("anvil did not listen within {} s", ANVIL_START_WAIT.as_secs()))),
        };
        dev.rpc_url = format!("http://127.0.0.1:{port}");
        dev.wait_ready().await?;
        Ok(dev)
    }

    /// Starts anvil, deploys `DrandBeacon` with the public key `pk_words` (the four
    /// constructor words, e.g. `dpor_beacon::LocalBeacon::public_key_words`), round 1
    /// at the chain's current time and one round every `period` seconds, then the
    /// market reading its seeds from it (`opts.beacon` is replaced). Returns the devnet
    /// and the beacon's address.
    pub async fn start_with_beacon(
        mut opts: DevnetOptions,
        pk_words: [U256; 4],
        period: u64,
    ) -> Result<(Devnet, Address), ChainError> {
        let root = repo_root();
        // The real anvil in its own process group, as `start_with` (this path once
        // started the npm wrapper without one, and its anvil outlived the test).
        let mut dev = Self::spawn_anvil(&root, &opts).await?;
        let genesis = dev.timestamp().await?;
        let words = format!("[{},{},{},{}]", pk_words[0], pk_words[1], pk_words[2], pk_words[3]);
        let beacon = dev
            .forge_create("contracts/src/beacon/DrandBeacon.sol:DrandBeacon", ANVIL_KEYS[0], &[words, genesis.to_string(), period.to_string()])
            .await?;
        opts.beacon = Some(beacon);
        dev.deploy(&opts).await?;
        Ok((dev, beacon))
    }

    /// Starts anvil with `opts` (block time, chain id) and deploys nothing: for tests
    /// that deploy as an operator would ([`Devnet::forge_create`],
    /// [`Devnet::forge_script_deploy`], then [`Devnet::adopt`]).
    pub async fn start_bare(opts: DevnetOptions) -> Result<Devnet, ChainError> {
        Self::spawn_anvil(&repo_root(), &opts).await
    }

    /// `forge create CONTRACT --constructor-args ARGS` signed by `key` (hex), from the
    /// repository root; returns the deployed address.
    pub async fn forge_create(&self, contract: &str, key: &str, args: &[String]) -> Result<Address, ChainError> {
        let root = repo_root();
        let err = |m: String| ChainError::Rpc { method: "devnet", message: m };
        let _guard = DEPLOY_LOCK.lock().await;
        let mut cmd = tokio::process::Command::new(foundry_binary(&root, "forge")?);
        cmd.current_dir(&root)
            .args(["create", contract, "--rpc-url", &self.rpc_url, "--broadcast", "--private-key", key])
            .stdin(Stdio::null());
        if !args.is_empty() {
            cmd.arg("--constructor-args").args(args);
        }
        let out = cmd.output().await.map_err(|e| err(format!("cannot run forge create: {e}")))?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if !out.status.success() {
            return Err(err(format!("forge create {contract} failed:\n{text}")));
        }
        text.lines()
            .find_map(|l| l.trim().strip_prefix("Deployed to:").and_then(|v| v.trim().parse::<Address>().ok()))
            .ok_or_else(|| err(format!("no address in the forge create output:\n{text}")))
    }

    /// Runs `forge script contracts/script/Deploy.s.sol:Deploy --broadcast` against this
    /// anvil from the repository root with exactly the Deploy.s.sol variables of `env`
    /// (the others of [`DEPLOY_ENV`] removed), and returns its output whether or not it
    /// succeeded. Nothing of the result is adopted (see [`Devnet::adopt`]).
    ///
    /// # Errors
    /// [`ChainError::Rpc`] only if forge cannot be started.
    pub async fn forge_script_deploy(&self, env: &[(&str, String)]) -> Result<ScriptRun, ChainError> {
        let root = repo_root();
        let _guard = DEPLOY_LOCK.lock().await;
        let mut cmd = tokio::process::Command::new(foundry_binary(&root, "forge")?);
        cmd.current_dir(&root)
            .args(["script", "contracts/script/Deploy.s.sol:Deploy", "--rpc-url", &self.rpc_url, "--broadcast"])
            .stdin(Stdio::null());
        for k in DEPLOY_ENV {
            cmd.env_remove(k);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().await.map_err(|e| rpc_err("devnet", format!("cannot run forge: {e}")))?;
        let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        Ok(ScriptRun { ok: out.status.success(), output })
    }

    /// Takes the market, token, manifest and deploy block of `d` as this devnet's (for
    /// [`Devnet::market`], [`Devnet::client`], …).
    pub fn adopt(&mut self, d: &crate::Deployment) {
        self.market = d.market;
        self.token = d.token.unwrap_or_default();
        self.manifest = d.manifest.unwrap_or_default();
        self.deploy_block = d.deploy_block;
    }

    async fn wait_ready(&mut self) -> Result<(), ChainError> {
        let url = self.rpc_url.parse().map_err(|e| rpc_err("devnet", e))?;
        let p = ProviderBuilder::new().connect_http(url);
        let deadline = tokio::time::Instant::now() + ANVIL_START_WAIT;
        while tokio::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(rpc_err("devnet", format!("anvil exited: {status}")));
            }
            if let Ok(id) = p.get_chain_id().await {
                self.chain_id = id;
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(rpc_err("devnet", format!("anvil did not answer within {} s", ANVIL_START_WAIT.as_secs())))
    }

    /// Deploys with Deploy.s.sol ([`Devnet::forge_script_deploy`]: only the variables
    /// `opts` sets, every other one of [`DEPLOY_ENV`] cleared) and adopts the deployment
    /// it prints (`DPOR_DEPLOYMENT={…}`).
    async fn deploy(&mut self, opts: &DevnetOptions) -> Result<(), ChainError> {
        let envs: [(&str, Option<String>); 10] = [
            ("EPOCH_SECONDS", opts.epoch_seconds.map(|v| v.to_string())),
            ("ANSWER_SECONDS", opts.answer_seconds.map(|v| v.to_string())),
            ("GRACE_SECONDS", opts.grace_seconds.map(|v| v.to_string())),
            ("UPLOAD_SECONDS", opts.upload_seconds.map(|v| v.to_string())),
            ("EXIT_NOTICE_EPOCHS", opts.exit_notice_epochs.map(|v| v.to_string())),
            ("DISPUTE_BOND", opts.dispute_bond.map(|v| v.to_string())),
            ("MAX_FAILURES", opts.max_failures.map(|v| v.to_string())),
            ("MIN_STAKE", opts.min_stake.map(|v| v.to_string())),
            ("BEACON", opts.beacon.map(|v| v.to_string())),
            // Anvil's account 0, which is also the script's default on a local chain id.
            ("DEPLOYER_KEY", Some(ANVIL_KEYS[0].to_string())),
        ];
        let env: Vec<(&str, String)> = envs.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect();
        let run = self.forge_script_deploy(&env).await?;
        if !run.ok {
            return Err(rpc_err("devnet", format!("forge script failed:\n{}", run.output)));
        }
        let d = crate::Deployment::from_output(&run.output)
            .map_err(|e| rpc_err("devnet", format!("{e} in the deploy output:\n{}", run.output)))?;
        self.adopt(&d);
        Ok(())
    }

    /// The process id of anvil (also its process group id on unix).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The JSON-RPC URL (`http://127.0.0.1:PORT`).
    pub fn rpc_url(&self) -> &str {
        &self.rpc_url
    }

    /// The market's address.
    pub fn market(&self) -> Address {
        self.market
    }

    /// The FileManifest registry's address (docs/CONTRACTS.md §10).
    pub fn manifest(&self) -> Address {
        self.manifest
    }

    /// The TestToken's address.
    pub fn token(&self) -> Address {
        self.token
    }

    /// The chain id (anvil: 31337).
    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    /// The block number the deploy script reported (log scans may start here).
    pub fn deploy_block(&self) -> u64 {
        self.deploy_block
    }

    /// Anvil's default account `i` (0..10; 0 deployed the contracts). Panics for i ≥ 10.
    pub fn key(&self, i: usize) -> PrivateKeySigner {
        #[allow(clippy::expect_used)]
        parse_key(ANVIL_KEYS[i]).expect("anvil's default keys are valid")
    }

    /// A [`Market`] client signing with account `i`.
    pub async fn client(&self, i: usize) -> Result<Market, ChainError> {
        Market::connect(&self.rpc_url, self.market, Some(self.key(i))).await
    }

    /// Mines `n` blocks at once (`anvil_mine`; each one second after the last).
    pub async fn mine(&self, n: u64) -> Result<(), ChainError> {
        let _: serde_json::Value = self.rpc("anvil_mine", (U256::from(n),)).await?;
        Ok(())
    }

    /// Moves chain time forward by `seconds` and mines one block with that timestamp
    /// (`evm_increaseTime` + `evm_mine`). Returns the new block's timestamp.
    pub async fn increase_time(&self, seconds: u64) -> Result<u64, ChainError> {
        let _: serde_json::Value = self.rpc("evm_increaseTime", (U256::from(seconds),)).await?;
        let _: serde_json::Value = self.rpc("evm_mine", ()).await?;
        self.timestamp().await
    }

    /// The next block (mined by the next transaction, with automine) gets timestamp `ts`
    /// (`anvil_setNextBlockTimestamp`; `ts` must be later than the latest block's).
    pub async fn set_next_timestamp(&self, ts: u64) -> Result<(), ChainError> {
        let _: serde_json::Value = self.rpc("anvil_setNextBlockTimestamp", (U256::from(ts),)).await?;
        Ok(())
    }

    /// Mines one block with timestamp `ts` (`anvil_setNextBlockTimestamp` + `evm_mine`),
    /// or, if the chain is already at or past `ts`, one block one second later than the
    /// latest. Returns the new block's timestamp (≥ `ts`).
    pub async fn warp_to(&self, ts: u64) -> Result<u64, ChainError> {
        let now = self.timestamp().await?;
        if ts > now {
            let _: serde_json::Value = self.rpc("anvil_setNextBlockTimestamp", (U256::from(ts),)).await?;
        }
        let _: serde_json::Value = self.rpc("evm_mine", ()).await?;
        self.timestamp().await
    }

    /// The latest block's timestamp.
    pub async fn timestamp(&self) -> Result<u64, ChainError> {
        use alloy::eips::BlockNumberOrTag;
        let url = self.rpc_url.parse().map_err(|e| rpc_err("eth_getBlockByNumber", e))?;
        let b = ProviderBuilder::new()
            .connect_http(url)
            .get_block_by_number(BlockNumberOrTag::Latest)
            .await
            .map_err(|e| rpc_err("eth_getBlockByNumber", e))?
            .ok_or_else(|| rpc_err("eth_getBlockByNumber", "no latest block"))?;
        Ok(b.header.timestamp)
    }

    /// The current block number.
    pub async fn block_number(&self) -> Result<u64, ChainError> {
        let url = self.rpc_url.parse().map_err(|e| rpc_err("eth_blockNumber", e))?;
        ProviderBuilder::new().connect_http(url).get_block_number().await.map_err(|e| rpc_err("eth_blockNumber", e))
    }

    async fn rpc<P, R>(&self, method: &'static str, params: P) -> Result<R, ChainError>
    where
        P: serde::Serialize + Clone + std::fmt::Debug + Send + Sync + Unpin,
        R: serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + Unpin + 'static,
    {
        let url = self.rpc_url.parse().map_err(|e| rpc_err(method, e))?;
        ProviderBuilder::new().connect_http(url).raw_request(method.into(), params).await.map_err(|e| rpc_err(method, e))
    }
}

/// The real executable of the Foundry tool `tool` (`"forge"`, `"anvil"` or `"cast"`)
/// that the npm package installed: `node_modules/@foundry-rs/<tool>-<os>-<arch>/bin/<tool>`
/// (or the package's `dist/<tool>`), as `script/foundry-bin` finds it.
///
/// Never `node_modules/.bin/<tool>`: that one is a Node script which starts the binary as
/// its child, exits 0 whatever the binary returns (so a failed `forge script` or `cast`
/// call would look like a success) and does not pass SIGKILL on (killing it leaves
/// anvil running). There is no fallback to it.
///
/// # Errors
/// [`ChainError::Rpc`] (method `devnet`) when no such executable is installed.
pub fn foundry_binary(root: &Path, tool: &str) -> Result<PathBuf, ChainError> {
    let scope = root.join("node_modules/@foundry-rs");
    let prefix = format!("{tool}-");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&scope)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix)))
        .map(|e| e.path().join("bin").join(tool))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.push(scope.join(tool).join("dist").join(tool));
    found.into_iter().find(|p| p.is_file()).ok_or_else(|| ChainError::Rpc {
        method: "devnet",
        message: format!("no {tool} executable under {} (run `npm install`)", scope.display()),
    })
}

impl Drop for Devnet {
    fn drop(&mut self) {
        // The child leads its own process group: end the group (anvil, and its wrapper
        // if it is one), then reap the child.
        #[cfg(unix)]
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl std::fmt::Debug for Devnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Devnet").field("rpc_url", &self.rpc_url).field("market", &self.market).finish()
    }
}

/// `$DPOR_ROOT`, else this crate's parent directory.
pub fn repo_root() -> PathBuf {
    match std::env::var_os("DPOR_ROOT") {
        Some(r) => PathBuf::from(r),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default(),
    }
}

/// How long a devnet's anvil may take to listen and to answer, each (a loaded 2-core
/// machine running several test binaries at once).
const ANVIL_START_WAIT: Duration = Duration::from_secs(60);

/// The port anvil prints in its "Listening on 127.0.0.1:PORT" line on `stdout`, read
/// on a thread of its own, which then drains the rest of anvil's output (one line per
/// RPC call) until anvil exits, so that anvil never blocks on a full pipe. `Err(())`
/// if the output ends (anvil exited) before that line.
async fn listening_port(stdout: std::process::ChildStdout) -> Result<u16, ()> {
    use std::io::BufRead;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name("anvil-output".into()).spawn(move || {
        let mut out = std::io::BufReader::new(stdout);
        let mut line = Vec::new();
        while matches!(out.read_until(b'\n', &mut line), Ok(n) if n > 0) {
            let text = String::from_utf8_lossy(&line);
            let port = text.trim().strip_prefix("Listening on ").and_then(|a| a.rsplit(':').next()).and_then(|p| p.parse::<u16>().ok());
            if let Some(port) = port {
                let _ = tx.send(port);
                // The rest of the output, until anvil exits.
                let _ = std::io::copy(&mut out, &mut std::io::sink());
                return;
            }
            line.clear();
        }
    });
    if spawned.is_err() {
        return Err(());
    }
    rx.await.map_err(|_| ())
}

/// Writes `dir/foundry.toml`, a Foundry config that extends the repository's
/// (`extends`) and lets forge's file cheatcodes read exactly `read` and write inside
/// `write` (`fs_permissions`); returns its path, for `FOUNDRY_CONFIG`. This is how
/// Deploy.s.sol reads a config file and writes its deployment file outside the folders
/// the repository's foundry.toml allows (`deploy/`, `deployments/`), without changing
/// any file of the repository (docs/OPERATIONS.md, "Deploying the contracts").
///
/// # Errors
/// A path with a `'` (it could not be written as a TOML literal string), or the write.
pub fn foundry_overlay(dir: &Path, read: &[&Path], write: &[&Path]) -> std::io::Result<PathBuf> {
    let lit = |p: &Path| -> std::io::Result<String> {
        let s = p.to_string_lossy();
        if s.contains('\'') || s.contains('\n') {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("path {s:?} has a quote or a newline")));
        }
        Ok(format!("'{s}'"))
    };
    let mut perms = Vec::new();
    for p in read {
        perms.push(format!("{{ access = \"read\", path = {} }}", lit(p)?));
    }
    for p in write {
        perms.push(format!("{{ access = \"write\", path = {} }}", lit(p)?));
    }
    let text = format!(
        "# Written by dpor_chain::devnet::foundry_overlay.\n[profile.default]\nextends = {}\nfs_permissions = [{}]\n",
        lit(&repo_root().join("foundry.toml"))?,
        perms.join(", ")
    );
    let path = dir.join("foundry.toml");
    std::fs::write(&path, text)?;
    Ok(path)
}
