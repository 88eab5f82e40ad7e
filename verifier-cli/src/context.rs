//! What every command shares: the global flags, the chain client, and how to reach
//! a deal's node (its multiaddrs are read from the provider's record on chain).

use crate::node_client::NodeClient;
use alloy::signers::local::PrivateKeySigner;
use alloy_primitives::Address;
use anyhow::{bail, Context};
use clap::Args;
use dpor_chain::{Deployment, Market};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Global flags (each also read from an environment variable).
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Chain JSON-RPC URL.
    #[arg(long, global = true, env = "DPOR_RPC_URL", default_value = "http://127.0.0.1:8545")]
    pub rpc_url: String,
    /// The deployment file `contracts/script/Deploy.s.sol` wrote (JSON): the market, the
    /// FileManifest and the chain id come from it (checked against the RPC endpoint).
    #[arg(long, global = true, env = "DPOR_DEPLOYMENT", value_name = "FILE")]
    pub deployment: Option<PathBuf>,
    /// Market contract address (default: the deployment file's, else its address on a
    /// fresh local anvil). With --deployment, it must be the file's.
    #[arg(long, global = true, env = "DPOR_MARKET")]
    pub market: Option<String>,
    /// File holding your Ethereum private key (hex): the owner's or auditor's account.
    #[arg(long, global = true, env = "DPOR_KEY_FILE")]
    pub key_file: Option<PathBuf>,
    /// The owner's state file (seed, counters, roots).
    #[arg(long, global = true, env = "DPOR_STATE", default_value = "dpor-owner.json")]
    pub state: PathBuf,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Node request timeout, seconds.
    #[arg(long, global = true, default_value_t = 300)]
    pub timeout: u64,
    /// Dial this node multiaddr instead of the one registered on chain.
    #[arg(long, global = true, env = "DPOR_NODE")]
    pub node: Option<String>,
}

/// The market's address on a fresh local anvil deployed by Deploy.s.sol with its
/// default key and a TestToken (deployer nonce 1): the default without `--market` or
/// `--deployment`.
pub const LOCAL_MARKET: &str = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512";

/// The market address to use: `--market` (or `DPOR_MARKET`), else the deployment's,
/// else [`LOCAL_MARKET`]. A `--market` that differs from the deployment file's is refused
/// (a stale `DPOR_MARKET` in the environment would otherwise win silently).
///
/// # Errors
/// A malformed address, or the conflict.
pub fn resolve_market(market: Option<&str>, deployment: Option<(&Path, &Deployment)>) -> anyhow::Result<Address> {
    let given = market.map(|m| m.trim().parse::<Address>().with_context(|| format!("bad market address {m:?}"))).transpose()?;
    match (given, deployment) {
        (Some(m), Some((path, d))) if m != d.market => bail!(
            "--market (or DPOR_MARKET) {m} is not the market of the deployment file {} ({}): give one of them",
            path.display(),
            d.market
        ),
        (Some(m), _) => Ok(m),
        (None, Some((_, d))) => Ok(d.market),
        (None, None) => LOCAL_MARKET.parse().context("the local market address"),
    }
}

/// The command context.
pub struct Ctx {
    /// The market client (with the user's key if one was given).
    pub market: Market,
    /// The user's key, if given.
    pub key: Option<PrivateKeySigner>,
    /// JSON output.
    pub json: bool,
    /// Show progress bars (text output on a terminal).
    pub progress: bool,
    /// The owner state file.
    pub state_path: PathBuf,
    /// Node request timeout.
    pub timeout: Duration,
    /// A node address that overrides the chain's.
    pub node_override: Option<String>,
    /// The deployment file given with `--deployment`, checked against the chain.
    pub deployment: Option<Deployment>,
}

impl Ctx {
    /// Connects to the chain.
    pub async fn new(args: &GlobalArgs) -> anyhow::Result<Self> {
        let key = match &args.key_file {
            Some(f) => {
                let hex = std::fs::read_to_string(f).with_context(|| format!("cannot read key file {}", f.display()))?;
                Some(dpor_chain::parse_key(hex.trim()).context("bad private key")?)
            }
            None => None,
        };
        let deployment = args.deployment.as_deref().map(|p| Deployment::load(p).map(|d| (p, d))).transpose()?;
        let market_addr = resolve_market(args.market.as_deref(), deployment.as_ref().map(|(p, d)| (*p, d)))?;
        let market = Market::connect(&args.rpc_url, market_addr, key.clone())
            .await
            .with_context(|| format!("cannot reach the market {market_addr} at {}", args.rpc_url))?;
        if let Some((path, d)) = &deployment {
            d.check(&market).await.with_context(|| format!("the deployment file {}", path.display()))?;
        }
        use std::io::IsTerminal;
        Ok(Self {
            market,
            key,
            json: args.json,
            progress: !args.json && std::io::stderr().is_terminal(),
            state_path: args.state.clone(),
            timeout: Duration::from_secs(args.timeout),
            node_override: args.node.clone(),
            deployment: deployment.map(|(_, d)| d),
        })
    }

    /// The user's key, or a clear error.
    pub fn key(&self) -> anyhow::Result<&PrivateKeySigner> {
        self.key.as_ref().context("this command needs your key: pass --key-file (or set DPOR_KEY_FILE)")
    }

    /// The FileManifest registry: `given` (`--manifest` / `DPOR_MANIFEST`), else the
    /// deployment file's, else its address on a fresh local anvil
    /// ([`crate::disperse::LOCAL_MANIFEST`]).
    pub fn manifest_address(&self, given: Option<Address>) -> anyhow::Result<Address> {
        if let Some(m) = given {
            return Ok(m);
        }
        if let Some(m) = self.deployment.as_ref().and_then(|d| d.manifest) {
            return Ok(m);
        }
        crate::disperse::LOCAL_MANIFEST.parse().context("the local manifest address")
    }

    /// Dials the node of `deal`'s provider (its multiaddrs registered on chain).
    pub async fn node_for_deal(&self, deal: u64) -> anyhow::Result<NodeClient> {
        if let Some(a) = &self.node_override {
            return NodeClient::connect(a, self.timeout).await;
        }
        let d = self.market.get_deal(deal).await?;
        if d.state == dpor_chain::DealState::None {
            bail!("deal {deal} does not exist on chain");
        }
        self.node_for_provider(d.provider).await
    }

    /// Dials a provider's node by its on-chain record.
    pub async fn node_for_provider(&self, provider: Address) -> anyhow::Result<NodeClient> {
        let p = self.market.get_provider(provider).await?;
        if !p.registered {
            bail!("{provider} is not a registered provider");
        }
        let mut last = None;
        for addr in &p.multiaddrs {
            match NodeClient::connect(addr, self.timeout).await {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        match last {
            Some(e) => Err(e.context(format!("no address of provider {provider} answers"))),
            None => bail!("provider {provider} registered no addresses"),
        }
    }

    /// A progress bar for `what` (hidden unless text output on a terminal).
    pub fn bar(&self, what: &str) -> Bar {
        if !self.progress {
            return Bar(indicatif::ProgressBar::hidden());
        }
        let bar = indicatif::ProgressBar::new(0);
        let style = indicatif::ProgressStyle::with_template("{msg:>10} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(what.to_string());
        Bar(bar)
    }
}

/// A terminal progress bar ([`Ctx::bar`]) that the library's flows report to
/// ([`dpor_client::progress::Progress`]).
pub struct Bar(pub indicatif::ProgressBar);

impl std::ops::Deref for Bar {
    type Target = indicatif::ProgressBar;
    fn deref(&self) -> &indicatif::ProgressBar {
        &self.0
    }
}

impl dpor_client::progress::Progress for Bar {
    fn set_length(&self, total: u64) {
        self.0.set_length(total);
    }
    fn inc(&self, delta: u64) {
        self.0.inc(delta);
    }
    fn set_position(&self, done: u64) {
        self.0.set_position(done);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_market_comes_from_the_flag_the_deployment_or_the_local_default() {
        let d = Deployment::parse(r#"{"chain_id": 5, "market": "0x00000000000000000000000000000000000000aa"}"#).unwrap();
        let path = Path::new("deployment.json");
        let aa: Address = "0x00000000000000000000000000000000000000aa".parse().unwrap();
        assert_eq!(resolve_market(None, Some((path, &d))).unwrap(), aa);
        assert_eq!(resolve_market(Some("0x00000000000000000000000000000000000000AA"), Some((path, &d))).unwrap(), aa);
        assert_eq!(resolve_market(None, None).unwrap(), LOCAL_MARKET.parse::<Address>().unwrap());
        let bb = "0x00000000000000000000000000000000000000bb";
        assert_eq!(resolve_market(Some(bb), None).unwrap(), bb.parse::<Address>().unwrap());
        let e = resolve_market(Some(bb), Some((path, &d))).unwrap_err().to_string();
        assert!(e.contains("not the market of the deployment file deployment.json"), "{e}");
        assert!(resolve_market(Some("0x12"), None).is_err());
    }
}
