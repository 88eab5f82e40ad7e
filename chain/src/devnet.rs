//! A throw-away local chain for tests (feature `devnet`): anvil (the real binary of the
//! npm package, [`foundry_binary`]) on a free loopback port with the contracts deployed by `contracts/script/Deploy.s.sol`
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
        dev.deploy(&root, &opts).await?;
        Ok(dev)
    }

    /// Starts the real anvil binary ([`foundry_binary`]) on a free loopback port, in its
    /// own process group (so that drop ends the whole group, anything anvil started
    /// included), and waits until it answers. Nothing is deployed yet.
    async fn spawn_anvil(root: &Path, opts: &DevnetOptions) -> Result<Devnet, ChainError> {
        let err = |m: String| ChainError::Rpc { method: "devnet", message: m };
        let port = free_port().map_err(|e| err(format!("no free port: {e}")))?;
        let anvil = foundry_binary(root, "anvil")?;
        let mut cmd = Command::new(&anvil);
        cmd.args(["--host", "127.0.0.1", "--port", &port.to_string(), "--silent"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(bt) = opts.block_time {
            cmd.args(["--block-time", &format!("{}", bt.as_secs_f64())]);
        }
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.spawn().map_err(|e| err(format!("cannot start {}: {e} (run `npm install`)", anvil.display())))?;
        let rpc_url = format!("http://127.0.0.1:{port}");
        let mut dev = Devnet { child, rpc_url, market: Address::ZERO, token: Address::ZERO, manifest: Address::ZERO, chain_id: 0, deploy_block: 0 };
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
        let err = |m: String| ChainError::Rpc { method: "devnet", message: m };
        // The real anvil in its own process group, as `start_with` (this path once
        // started the npm wrapper without one, and its anvil outlived the test).
        let mut dev = Self::spawn_anvil(&root, &opts).await?;
        let genesis = dev.timestamp().await?;
        let beacon = {
            let _guard = DEPLOY_LOCK.lock().await;
            let words = format!("[{},{},{},{}]", pk_words[0], pk_words[1], pk_words[2], pk_words[3]);
            let out = tokio::process::Command::new(foundry_binary(&root, "forge")?)
                .current_dir(&root)
                .args(["create", "contracts/src/beacon/DrandBeacon.sol:DrandBeacon", "--rpc-url", &dev.rpc_url, "--broadcast"])
                .args(["--private-key", ANVIL_KEYS[0], "--constructor-args", &words, &genesis.to_string(), &period.to_string()])
                .stdin(Stdio::null())
                .output()
                .await
                .map_err(|e| err(format!("cannot run forge create: {e}")))?;
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            if !out.status.success() {
                return Err(err(format!("forge create DrandBeacon failed:\n{text}")));
            }
            text.lines()
                .find_map(|l| l.trim().strip_prefix("Deployed to:").and_then(|v| v.trim().parse::<Address>().ok()))
                .ok_or_else(|| err(format!("no address in the forge create output:\n{text}")))?
        };
        opts.beacon = Some(beacon);
        dev.deploy(&root, &opts).await?;
        Ok((dev, beacon))
    }

    async fn wait_ready(&mut self) -> Result<(), ChainError> {
        let url = self.rpc_url.parse().map_err(|e| rpc_err("devnet", e))?;
        let p = ProviderBuilder::new().connect_http(url);
        for _ in 0..200 {
            if let Ok(id) = p.get_chain_id().await {
                self.chain_id = id;
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(rpc_err("devnet", format!("anvil exited: {status}")));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(rpc_err("devnet", "anvil did not answer within 10 s"))
    }

    async fn deploy(&mut self, root: &Path, opts: &DevnetOptions) -> Result<(), ChainError> {
        let _guard = DEPLOY_LOCK.lock().await;
        let mut cmd = tokio::process::Command::new(foundry_binary(root, "forge")?);
        cmd.current_dir(root)
            .args(["script", "contracts/script/Deploy.s.sol:Deploy", "--rpc-url", &self.rpc_url, "--broadcast"])
            .stdin(Stdio::null());
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
            ("DEPLOYER_KEY", None),
        ];
        for (k, v) in envs {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let out = cmd.output().await.map_err(|e| rpc_err("devnet", format!("cannot run forge: {e}")))?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if !out.status.success() {
            return Err(rpc_err("devnet", format!("forge script failed:\n{text}")));
        }
        let field = |key: &str| -> Option<String> {
            text.lines().find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
        };
        let parse_addr = |key: &str| -> Result<Address, ChainError> {
            field(key)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| rpc_err("devnet", format!("no {key} in the deploy output:\n{text}")))
        };
        self.token = parse_addr("DPOR_TOKEN=")?;
        self.market = parse_addr("DPOR_MARKET=")?;
        self.manifest = parse_addr("DPOR_MANIFEST=")?;
        self.deploy_block = field("DPOR_DEPLOY_BLOCK=").and_then(|v| v.parse().ok()).unwrap_or(0);
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

fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}
