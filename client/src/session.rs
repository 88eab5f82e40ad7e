//! What every owner or auditor operation shares: the chain client, the user's key, the
//! owner state file, and how to reach a deal's node (its multiaddrs are read from the
//! provider's record on chain). Built from plain values ([`SessionConfig`]); the CLI
//! fills them from its flags and environment.

use crate::node_client::NodeClient;
use alloy::signers::local::PrivateKeySigner;
use alloy_primitives::Address;
use anyhow::{bail, Context};
use dpor_chain::{Deployment, Market};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The market's address on a fresh local anvil deployed by Deploy.s.sol with its
/// default key and a TestToken (deployer nonce 1): the default without a market
/// address or a deployment file.
pub const LOCAL_MARKET: &str = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512";

/// FileManifest's address on a fresh local anvil deployed by Deploy.s.sol with its
/// default key and a TestToken (deployer nonce 2); with a deployment file, the file's.
pub const LOCAL_MANIFEST: &str = "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0";

/// The market address to use: `market` (the CLI's `--market` or `DPOR_MARKET`), else
/// the deployment's, else [`LOCAL_MARKET`]. A `market` that differs from the deployment
/// file's is refused (a stale `DPOR_MARKET` in the environment would otherwise win
/// silently).
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

/// The plain values a [`Session`] is built from.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Chain JSON-RPC URL.
    pub rpc_url: String,
    /// The deployment file `contracts/script/Deploy.s.sol` wrote (JSON): the market, the
    /// FileManifest and the chain id come from it (checked against the RPC endpoint).
    pub deployment: Option<PathBuf>,
    /// The market contract's address, as text (see [`resolve_market`]).
    pub market: Option<String>,
    /// A file holding the user's Ethereum private key (hex).
    pub key_file: Option<PathBuf>,
    /// The owner's state file.
    pub state: PathBuf,
    /// Node request timeout.
    pub timeout: Duration,
    /// A node multiaddr to dial instead of the one registered on chain.
    pub node: Option<String>,
}

/// A connection to the market with the user's key and files: what the library's owner,
/// dispersal and auditor operations take.
#[derive(Clone)]
pub struct Session {
    /// The market client (with the user's key if one was given).
    pub market: Market,
    /// The user's key, if given.
    pub key: Option<PrivateKeySigner>,
    /// The owner state file.
    pub state_path: PathBuf,
    /// Node request timeout.
    pub timeout: Duration,
    /// A node address that overrides the chain's.
    pub node_override: Option<String>,
    /// The deployment file given in the config, checked against the chain.
    pub deployment: Option<Deployment>,
}

impl Session {
    /// Reads the key and the deployment file, connects to the chain and checks the
    /// deployment against it.
    ///
    /// # Errors
    /// An unreadable or malformed key or deployment file, an unreachable market, or a
    /// deployment that is not the chain's.
    pub async fn connect(config: &SessionConfig) -> anyhow::Result<Self> {
        let key = match &config.key_file {
            Some(f) => {
                let hex = std::fs::read_to_string(f).with_context(|| format!("cannot read key file {}", f.display()))?;
                Some(dpor_chain::parse_key(hex.trim()).context("bad private key")?)
            }
            None => None,
        };
        let deployment = config.deployment.as_deref().map(|p| Deployment::load(p).map(|d| (p, d))).transpose()?;
        let market_addr = resolve_market(config.market.as_deref(), deployment.as_ref().map(|(p, d)| (*p, d)))?;
        let market = Market::connect(&config.rpc_url, market_addr, key.clone())
            .await
            .with_context(|| format!("cannot reach the market {market_addr} at {}", config.rpc_url))?;
        if let Some((path, d)) = &deployment {
            d.check(&market).await.with_context(|| format!("the deployment file {}", path.display()))?;
        }
        Ok(Self {
            market,
            key,
            state_path: config.state.clone(),
            timeout: config.timeout,
            node_override: config.node.clone(),
            deployment: deployment.map(|(_, d)| d),
        })
    }

    /// This session with another owner state file (one shard's, in dispersal) and no
    /// node override (each shard's node is its provider's).
    pub fn with_state(&self, state: PathBuf) -> Self {
        Self { state_path: state, node_override: None, ..self.clone() }
    }

    /// The user's key, or a clear error.
    ///
    /// # Errors
    /// No key was given.
    pub fn key(&self) -> anyhow::Result<&PrivateKeySigner> {
        self.key.as_ref().context("this command needs your key: pass --key-file (or set DPOR_KEY_FILE)")
    }

    /// The FileManifest registry: `given` (`--manifest` / `DPOR_MANIFEST`), else the
    /// deployment file's, else its address on a fresh local anvil ([`LOCAL_MANIFEST`]).
    ///
    /// # Errors
    /// None in practice (the constant parses).
    pub fn manifest_address(&self, given: Option<Address>) -> anyhow::Result<Address> {
        if let Some(m) = given {
            return Ok(m);
        }
        if let Some(m) = self.deployment.as_ref().and_then(|d| d.manifest) {
            return Ok(m);
        }
        LOCAL_MANIFEST.parse().context("the local manifest address")
    }

    /// Dials the node of `deal`'s provider (its multiaddrs registered on chain), or the
    /// override.
    ///
    /// # Errors
    /// The deal does not exist, the chain cannot be read, or no address answers.
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
    ///
    /// # Errors
    /// Not a registered provider, the chain cannot be read, or no address answers.
    pub async fn node_for_provider(&self, provider: Address) -> anyhow::Result<NodeClient> {
        let p = self.market.get_provider(provider).await?;
        if !p.registered {
            bail!("{provider} is not a registered provider");
        }
        dial_registered(&p.multiaddrs, provider, self.timeout).await
    }
}

/// Dials the first of a provider's registered `multiaddrs` that answers.
///
/// # Errors
/// No address answers, or none is registered.
pub async fn dial_registered(multiaddrs: &[String], provider: Address, timeout: Duration) -> anyhow::Result<NodeClient> {
    let mut last = None;
    for addr in multiaddrs {
        match NodeClient::connect(addr, timeout).await {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
    }
    match last {
        Some(e) => Err(e.context(format!("no address of provider {provider} answers"))),
        None => bail!("provider {provider} registered no addresses"),
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
