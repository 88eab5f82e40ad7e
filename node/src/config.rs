//! The node's configuration: a TOML file, every field overridable by a flag
//! (`dpor-node run --help`). Defaults work against the local chain `script/demo` starts.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The smallest chain polling interval the node accepts, in milliseconds.
pub const MIN_POLL_INTERVAL_MS: u64 = 50;

/// Everything the node needs to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// Folder for the store (sled metadata + run files) and the libp2p key.
    pub data_dir: PathBuf,
    /// libp2p listen address (TCP), e.g. `/ip4/127.0.0.1/tcp/4001`.
    pub listen: String,
    /// Addresses to register on chain (default: the bound listen addresses, with `/p2p/<peer id>`).
    pub announce: Vec<String>,
    /// JSON-RPC URL of the chain.
    pub rpc_url: String,
    /// The market contract address (0x…). Default: the `deployment` file's market, else
    /// [`LOCAL_MARKET`]. With `deployment`, it must be the file's market.
    pub market: Option<String>,
    /// The deployment file `contracts/script/Deploy.s.sol` wrote (`DPOR_DEPLOY_OUT`): the
    /// market and the chain id come from it, and the node refuses to start on another
    /// chain or against a market that does not match it. A relative path is relative to
    /// the node's working directory, like every path of this file.
    pub deployment: Option<PathBuf>,
    /// The provider's Ethereum private key (0x…, 32 bytes). Prefer `provider_key_file`.
    pub provider_key: Option<String>,
    /// A file holding the provider's private key in hex.
    pub provider_key_file: Option<PathBuf>,
    /// Asking price, in token base units (wei of the ERC-20) per block per epoch.
    pub price_per_block_epoch: u128,
    /// Collateral the node locks per block of a deal, in token base units.
    pub collateral_per_block: u128,
    /// Blocks the node offers in total across deals.
    pub capacity_blocks: u64,
    /// Registration stake, in token base units.
    pub stake: u128,
    /// Accept every open deal addressed to this node (subject to capacity).
    pub auto_accept: bool,
    /// Withdraw owed payments automatically.
    pub auto_withdraw: bool,
    /// Chain polling interval, milliseconds (at least [`MIN_POLL_INTERVAL_MS`]).
    pub poll_interval_ms: u64,
    /// Refuse uploads and writes that would take the store over this many bytes.
    pub quota_bytes: Option<u64>,
    /// Request timeout on the libp2p side, seconds.
    pub request_timeout_secs: u64,
    /// Cap on the bytes per second the node serves in bulk reads (`Download`, `Coded`),
    /// across all peers: an operator's bandwidth budget (as Storj and Sia hosts set
    /// one); none by default. Audits, proofs and owner writes are not paced.
    pub serve_rate_bytes_per_sec: Option<u64>,
    /// Deamortized rebuilds (§6.1; docs/SCHEME.md §10.3): a write that would build a
    /// run of at least this many coded blocks is acknowledged first and the run built
    /// in the background. 0 builds every run inside its write. Default
    /// [`DEFAULT_DEFER_FROM_BLOCKS`].
    pub defer_from_blocks: u64,
    /// Bytes of memory (8 per field element) the store keeps of the levels of H it
    /// wrote last, so that the write consuming them does not read them back (issue 23;
    /// `store/run_cache.rs`). 0 keeps none. Default
    /// [`crate::store::DEFAULT_RUN_CACHE_BYTES`] (256 MiB).
    pub run_cache_bytes: u64,
    /// Bytes of memory (16·N·width per upload) the store may hold at once to build
    /// uploads' C while their blocks arrive (issue 23; `store/upload_stream.rs`); an
    /// upload that does not fit builds C at the end from U read back. 0: never. Default
    /// [`crate::store::DEFAULT_UPLOAD_STREAM_BYTES`] (2 GiB).
    pub upload_stream_bytes: u64,
    /// Prove epochs with one commitment per global epoch over all deals
    /// (docs/COMMITMENTS.md) instead of one `submitEpochProof` per deal. Default false.
    pub epoch_commitments: bool,
    /// Serve Prometheus metrics on `http://ADDR/metrics` and the health report on
    /// `http://ADDR/health` (docs/OPERATIONS.md, "Metrics and health"), e.g.
    /// `"127.0.0.1:9464"`. No TLS or authentication: keep it on loopback or a private
    /// network. Off unless set.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Serve the web dashboard (docs/OPERATIONS.md, "Web dashboard") on
    /// `http://ADDR/`, e.g. `"127.0.0.1:8080"`. Off unless set. An address that is
    /// not loopback needs `dashboard_token`: the node refuses to start without it.
    pub dashboard_listen: Option<std::net::SocketAddr>,
    /// The dashboard's access token (at least 16 characters): with it, every API
    /// request must carry it (`Authorization: Bearer TOKEN`, or open the page as
    /// `/?token=TOKEN`). Required when `dashboard_listen` is not loopback.
    pub dashboard_token: Option<String>,
    /// The built front end (`npm run build --workspace dashboard` writes
    /// dashboard/dist). Unset: only the JSON API under `/api/` is served.
    pub dashboard_dir: Option<PathBuf>,
    /// Testing only (cargo feature `testing`; not a key of a normal build): answer
    /// audits like a cheating node (see `handler::Misbehavior`).
    #[cfg(feature = "testing")]
    pub misbehave: crate::handler::Misbehavior,
}

/// The market's address on a fresh anvil deployed by contracts/script/Deploy.s.sol with
/// its default key and a TestToken (deployer nonce 1): the default without `market` or
/// `deployment`.
pub const LOCAL_MARKET: &str = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512";

/// Runs of at least 2^10 coded blocks (levels ℓ ≥ 9 and C of files of ≥ 2^9 blocks,
/// 4 MiB at β = 4 KiB) are built in the background: a smaller run is built inside its
/// write within the 100 ms write-latency target (docs/PERFORMANCE.md; at 2^12 a
/// level of 8 MiB built inline took 169 ms on the bench machine).
pub const DEFAULT_DEFER_FROM_BLOCKS: u64 = 1 << 10;

impl Default for NodeConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from(".dpor-node"),
            listen: "/ip4/127.0.0.1/tcp/4001".into(),
            announce: Vec::new(),
            rpc_url: "http://127.0.0.1:8545".into(),
            market: None,
            deployment: None,
            provider_key: None,
            provider_key_file: None,
            price_per_block_epoch: 1_000_000_000_000,
            collateral_per_block: 2_000_000_000_000,
            capacity_blocks: 1 << 24,
            stake: 1000 * 10u128.pow(18),
            auto_accept: true,
            auto_withdraw: true,
            poll_interval_ms: 500,
            quota_bytes: None,
            request_timeout_secs: 300,
            serve_rate_bytes_per_sec: None,
            defer_from_blocks: DEFAULT_DEFER_FROM_BLOCKS,
            run_cache_bytes: crate::store::DEFAULT_RUN_CACHE_BYTES,
            upload_stream_bytes: crate::store::DEFAULT_UPLOAD_STREAM_BYTES,
            epoch_commitments: false,
            metrics_listen: None,
            dashboard_listen: None,
            dashboard_token: None,
            dashboard_dir: None,
            #[cfg(feature = "testing")]
            misbehave: crate::handler::Misbehavior::None,
        }
    }
}

impl NodeConfig {
    /// Reads a TOML file (unknown keys are an error, so typos are caught).
    pub fn load(path: &std::path::Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read config {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("config {}: {e}", path.display()))
    }

    /// Checks the values no type rules out: `poll_interval_ms` at least
    /// [`MIN_POLL_INTERVAL_MS`], `request_timeout_secs` at least 1, a dashboard off
    /// loopback only with an access token
    /// ([`crate::dashboard::auth::check_listen`]).
    ///
    /// # Errors
    /// What is wrong, naming the key and the allowed range.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.serve_rate_bytes_per_sec == Some(0) {
            anyhow::bail!("serve_rate_bytes_per_sec = 0 would serve nothing: leave it out for no cap, or give a rate in bytes per second");
        }
        if self.poll_interval_ms < MIN_POLL_INTERVAL_MS {
            anyhow::bail!(
                "poll_interval_ms = {} is too small: the node polls the chain at most every {MIN_POLL_INTERVAL_MS} ms; give {MIN_POLL_INTERVAL_MS} or more (2000 suits a public chain)",
                self.poll_interval_ms
            );
        }
        if self.request_timeout_secs == 0 {
            anyhow::bail!("request_timeout_secs = 0: give at least 1 (default 300)");
        }
        if let Some(addr) = self.dashboard_listen {
            crate::dashboard::auth::check_listen(addr, self.dashboard_token.as_deref())?;
        }
        Ok(())
    }

    /// The deployment file (if `deployment` is set) and the market to use: `market` if
    /// set, else the file's, else [`LOCAL_MARKET`].
    ///
    /// # Errors
    /// The file cannot be read or is not a deployment; `market` is malformed or is not
    /// the file's market.
    pub fn resolve_market(&self) -> anyhow::Result<(alloy_primitives::Address, Option<dpor_chain::Deployment>)> {
        let deployment = self.deployment.as_deref().map(dpor_chain::Deployment::load).transpose()?;
        let given = self
            .market
            .as_deref()
            .map(|m| m.trim().parse::<alloy_primitives::Address>().map_err(|e| anyhow::anyhow!("bad market address {m:?}: {e}")))
            .transpose()?;
        let market = match (given, &deployment) {
            (Some(m), Some(d)) if m != d.market => anyhow::bail!(
                "market = {m} is not the market of the deployment file {} ({}): set one of them",
                self.deployment.as_deref().unwrap_or(std::path::Path::new("")).display(),
                d.market
            ),
            (Some(m), _) => m,
            (None, Some(d)) => d.market,
            (None, None) => LOCAL_MARKET.parse().map_err(|e| anyhow::anyhow!("the local market address: {e}"))?,
        };
        Ok((market, deployment))
    }

    /// The provider key, from `provider_key` or `provider_key_file`.
    pub fn provider_key_hex(&self) -> anyhow::Result<String> {
        if let Some(k) = &self.provider_key {
            return Ok(k.trim().to_string());
        }
        if let Some(f) = &self.provider_key_file {
            let k = std::fs::read_to_string(f).map_err(|e| anyhow::anyhow!("cannot read key file {}: {e}", f.display()))?;
            return Ok(k.trim().to_string());
        }
        anyhow::bail!("no provider key: set provider_key_file (or provider_key) in the config, or pass --provider-key-file")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_file_and_rejects_typos() {
        let c: NodeConfig = toml::from_str("listen = \"/ip4/127.0.0.1/tcp/9\"\nquota_bytes = 10\n").unwrap();
        assert_eq!(c.listen, "/ip4/127.0.0.1/tcp/9");
        assert_eq!(c.quota_bytes, Some(10));
        assert_eq!(c.rpc_url, NodeConfig::default().rpc_url);
        assert!(toml::from_str::<NodeConfig>("lisen = \"x\"").is_err());
    }

    #[test]
    fn the_market_comes_from_the_key_the_deployment_file_or_the_local_default() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("deployment.json");
        std::fs::write(&file, r#"{"chain_id": 5, "market": "0x00000000000000000000000000000000000000aa"}"#).unwrap();
        let aa: alloy_primitives::Address = "0x00000000000000000000000000000000000000aa".parse().unwrap();
        let text = format!("deployment = {:?}\n", file.display().to_string());
        let c: NodeConfig = toml::from_str(&text).unwrap();
        let (m, d) = c.resolve_market().unwrap();
        assert_eq!((m, d.map(|d| d.chain_id)), (aa, Some(5)));
        let same: NodeConfig = toml::from_str(&format!("{text}market = \"0x00000000000000000000000000000000000000AA\"\n")).unwrap();
        assert_eq!(same.resolve_market().unwrap().0, aa);
        let other: NodeConfig = toml::from_str(&format!("{text}market = \"0x00000000000000000000000000000000000000bb\"\n")).unwrap();
        let e = other.resolve_market().unwrap_err().to_string();
        assert!(e.contains("is not the market of the deployment file"), "{e}");
        assert_eq!(NodeConfig::default().resolve_market().unwrap().0, LOCAL_MARKET.parse::<alloy_primitives::Address>().unwrap());
        let missing: NodeConfig = toml::from_str("deployment = \"/nonexistent/deployment.json\"\n").unwrap();
        assert!(missing.resolve_market().unwrap_err().to_string().contains("cannot read the deployment file"));
    }

    #[test]
    fn metrics_listen_is_off_by_default_and_parsed_as_an_address() {
        assert_eq!(NodeConfig::default().metrics_listen, None);
        let c: NodeConfig = toml::from_str("metrics_listen = \"127.0.0.1:9464\"\n").unwrap();
        assert_eq!(c.metrics_listen, Some("127.0.0.1:9464".parse().unwrap()));
        assert!(toml::from_str::<NodeConfig>("metrics_listen = \"localhost\"\n").is_err());
    }

    #[test]
    fn the_dashboard_is_off_by_default_and_needs_a_token_off_loopback() {
        let d = NodeConfig::default();
        assert_eq!((d.dashboard_listen, d.dashboard_token.as_deref(), d.dashboard_dir.as_deref()), (None, None, None));
        let c: NodeConfig = toml::from_str("dashboard_listen = \"127.0.0.1:8080\"\ndashboard_dir = \"dashboard/dist\"\n").unwrap();
        c.validate().unwrap();
        let c: NodeConfig = toml::from_str("dashboard_listen = \"0.0.0.0:8080\"\n").unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("dashboard_token") && e.contains("0.0.0.0:8080"), "{e}");
        let c: NodeConfig = toml::from_str("dashboard_listen = \"0.0.0.0:8080\"\ndashboard_token = \"0123456789abcdef\"\n").unwrap();
        c.validate().unwrap();
        let c: NodeConfig = toml::from_str("dashboard_listen = \"127.0.0.1:8080\"\ndashboard_token = \"short\"\n").unwrap();
        assert!(c.validate().is_err());
    }

    #[test]
    fn a_zero_serve_rate_is_refused() {
        let c: NodeConfig = toml::from_str("serve_rate_bytes_per_sec = 0\n").unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("serve_rate_bytes_per_sec = 0"), "{e}");
        let c: NodeConfig = toml::from_str("serve_rate_bytes_per_sec = 50000000\n").unwrap();
        assert!(c.validate().is_ok());
    }

    #[test]
    fn a_zero_poll_interval_or_timeout_is_refused() {
        let c: NodeConfig = toml::from_str("poll_interval_ms = 0\n").unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("poll_interval_ms = 0") && e.contains("50"), "{e}");
        let c: NodeConfig = toml::from_str("poll_interval_ms = 49\n").unwrap();
        assert!(c.validate().is_err());
        let c: NodeConfig = toml::from_str("poll_interval_ms = 50\n").unwrap();
        c.validate().unwrap();
        let c: NodeConfig = toml::from_str("request_timeout_secs = 0\n").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("request_timeout_secs"));
        NodeConfig::default().validate().unwrap();
    }

    /// A normal build has no cheat modes: `misbehave` is an unknown key, and the error
    /// listing the valid keys does not offer it.
    #[cfg(not(feature = "testing"))]
    #[test]
    fn misbehave_is_not_a_key_of_a_normal_build() {
        let e = toml::from_str::<NodeConfig>("misbehave = \"wrong-block\"\n").unwrap_err().to_string();
        assert!(e.contains("unknown field `misbehave`"), "{e}");
        let e = toml::from_str::<NodeConfig>("lisen = \"x\"\n").unwrap_err().to_string();
        assert!(e.contains("expected one of") && e.contains("`listen`"), "{e}");
        assert!(!e.contains("misbehave"), "a normal build offers the cheat modes: {e}");
    }

    /// With feature `testing` the cheat modes are a config key.
    #[cfg(feature = "testing")]
    #[test]
    fn misbehave_is_a_key_of_a_testing_build() {
        let c: NodeConfig = toml::from_str("misbehave = \"wrong-block\"\n").unwrap();
        assert_eq!(c.misbehave, crate::handler::Misbehavior::WrongBlock);
    }
}
