//! What every command shares: the global flags, the chain client, and how to reach
//! a deal's node (its multiaddrs are read from the provider's record on chain).

use crate::node_client::NodeClient;
use alloy::signers::local::PrivateKeySigner;
use alloy_primitives::Address;
use anyhow::{bail, Context};
use clap::Args;
use dpor_chain::Market;
use std::path::PathBuf;
use std::time::Duration;

/// Global flags (each also read from an environment variable).
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Chain JSON-RPC URL.
    #[arg(long, global = true, env = "DPOR_RPC_URL", default_value = "http://127.0.0.1:8545")]
    pub rpc_url: String,
    /// Market contract address (default: its address on a fresh local anvil).
    #[arg(long, global = true, env = "DPOR_MARKET", default_value = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512")]
    pub market: String,
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
        let market_addr: Address = args.market.parse().with_context(|| format!("bad market address {:?}", args.market))?;
        let market = Market::connect(&args.rpc_url, market_addr, key.clone())
            .await
            .with_context(|| format!("cannot reach the market {} at {}", args.market, args.rpc_url))?;
        use std::io::IsTerminal;
        Ok(Self {
            market,
            key,
            json: args.json,
            progress: !args.json && std::io::stderr().is_terminal(),
            state_path: args.state.clone(),
            timeout: Duration::from_secs(args.timeout),
            node_override: args.node.clone(),
        })
    }

    /// The user's key, or a clear error.
    pub fn key(&self) -> anyhow::Result<&PrivateKeySigner> {
        self.key.as_ref().context("this command needs your key: pass --key-file (or set DPOR_KEY_FILE)")
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
    pub fn bar(&self, what: &str) -> indicatif::ProgressBar {
        if !self.progress {
            return indicatif::ProgressBar::hidden();
        }
        let bar = indicatif::ProgressBar::new(0);
        let style = indicatif::ProgressStyle::with_template("{msg:>10} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(what.to_string());
        bar
    }
}
