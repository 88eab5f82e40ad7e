//! The deployment file: what `contracts/script/Deploy.s.sol` writes (`out` /
//! `DPOR_DEPLOY_OUT`) and prints (`DPOR_DEPLOYMENT={…}`), and what the node
//! (`deployment = "…"` in its config) and the CLI (`--deployment FILE`) read the
//! market's address and the chain id from (docs/OPERATIONS.md, "The deployment file").
//!
//! Only `chain_id` and `market` are required, so a file written by hand for a market
//! deployed some other way works too; every other field the script writes is optional
//! here, and fields this version does not know are ignored.

use crate::client::{contract_err, Market};
use alloy_primitives::Address;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The deployment of one market on one chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    /// The chain id the contracts were deployed on (`block.chainid`).
    pub chain_id: u64,
    /// The market (`DporMarket`): the address everything else is reached from.
    pub market: Address,
    /// The `FileManifest` registry over this market (docs/CONTRACTS.md §10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Address>,
    /// The market's commitments extension (`market.commitments()`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commitments: Option<Address>,
    /// The ERC-20 of escrow, collateral, stakes and bonds (`market.token()`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Address>,
    /// Whether the script deployed `TestToken` (anyone can mint it) rather than using
    /// an existing token.
    #[serde(default)]
    pub token_deployed: bool,
    /// The randomness beacon (`market.beacon()`; the zero address = development seeds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beacon: Option<Address>,
    /// Whether the market runs on development seeds (no beacon).
    #[serde(default)]
    pub dev_seeds: bool,
    /// A block at or before the deployment (log scans may start here).
    #[serde(default)]
    pub deploy_block: u64,
    /// The account that deployed the contracts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployer: Option<Address>,
}

/// Why a deployment file cannot be used.
#[derive(Debug, Error)]
pub enum DeploymentError {
    /// The file could not be read.
    #[error("cannot read the deployment file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a deployment (bad JSON, a missing `chain_id` or `market`, a
    /// malformed address).
    #[error("the deployment file {path} is not a deployment: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// No `DPOR_DEPLOYMENT=` line in the deploy script's output.
    #[error("no DPOR_DEPLOYMENT= line in the deploy output")]
    NotInOutput,
    /// The chain answering at the RPC URL is not the deployment's.
    #[error(
        "the deployment is on chain id {expected}, but the RPC endpoint serves chain id {actual}: wrong --rpc-url or wrong deployment file"
    )]
    WrongChain {
        /// The deployment's chain id.
        expected: u64,
        /// The endpoint's.
        actual: u64,
    },
    /// The market on chain does not match the file (`what`: token, beacon, commitments).
    #[error("the market {market} on chain has {what} {actual}, but the deployment file says {expected}")]
    Mismatch {
        /// The market.
        market: Address,
        /// Which field.
        what: &'static str,
        /// The file's value.
        expected: Address,
        /// The chain's.
        actual: Address,
    },
    /// The market could not be read.
    #[error("cannot check the deployment against the chain: {0}")]
    Chain(#[from] crate::ChainError),
}

/// The prefix of the line carrying the deployment in `forge script`'s output.
pub const OUTPUT_PREFIX: &str = "DPOR_DEPLOYMENT=";

impl Deployment {
    /// Reads and parses a deployment file.
    ///
    /// # Errors
    /// [`DeploymentError::Read`], [`DeploymentError::Parse`].
    pub fn load(path: &Path) -> Result<Deployment, DeploymentError> {
        let text = std::fs::read_to_string(path).map_err(|source| DeploymentError::Read { path: path.to_path_buf(), source })?;
        Self::parse(&text).map_err(|reason| DeploymentError::Parse { path: path.to_path_buf(), reason })
    }

    /// Parses the JSON of a deployment; the error is serde's description.
    ///
    /// # Errors
    /// What is wrong with the text.
    pub fn parse(json: &str) -> Result<Deployment, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    /// The deployment printed by `Deploy.s.sol` (the first `DPOR_DEPLOYMENT={…}` line,
    /// indented or not, of `forge script`'s output).
    ///
    /// # Errors
    /// [`DeploymentError::NotInOutput`], or [`DeploymentError::Parse`] (path `-`).
    pub fn from_output(text: &str) -> Result<Deployment, DeploymentError> {
        let json = text.lines().find_map(|l| l.trim().strip_prefix(OUTPUT_PREFIX)).ok_or(DeploymentError::NotInOutput)?;
        Self::parse(json).map_err(|reason| DeploymentError::Parse { path: PathBuf::from("-"), reason })
    }

    /// Checks the deployment against the chain `market` is connected to (which must be
    /// connected to [`Deployment::market`]): the chain id, and the market's token,
    /// beacon and commitments extension where the file names them.
    ///
    /// # Errors
    /// [`DeploymentError::WrongChain`], [`DeploymentError::Mismatch`], or
    /// [`DeploymentError::Chain`] when the market cannot be read.
    pub async fn check(&self, market: &Market) -> Result<(), DeploymentError> {
        if market.chain_id() != self.chain_id {
            return Err(DeploymentError::WrongChain { expected: self.chain_id, actual: market.chain_id() });
        }
        let mismatch = |what, expected, actual| DeploymentError::Mismatch { market: market.address(), what, expected, actual };
        if let Some(t) = self.token {
            if t != market.token_address() {
                return Err(mismatch("token", t, market.token_address()));
            }
        }
        if let Some(b) = self.beacon {
            let actual = market.market.beacon().call().await.map_err(|e| contract_err("beacon", e))?;
            if b != actual {
                return Err(mismatch("beacon", b, actual));
            }
        }
        if let Some(c) = self.commitments {
            let actual = market.market.commitments().call().await.map_err(|e| contract_err("commitments", e))?;
            if c != actual {
                return Err(mismatch("commitments extension", c, actual));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const SCRIPT_LINE: &str = r#"  DPOR_DEPLOYMENT={"chain_id":31337,"deploy_block":0,"deployer":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","token":"0x5FbDB2315678afecb367f032d93F642f64180aa3","token_deployed":true,"beacon":"0x0000000000000000000000000000000000000000","dev_seeds":true,"market":"0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512","verifier":"0xCafac3dD18aC6c6e92c921884f9E4176737C052c","extension":"0x9f1ac54BEF0DD2f6f3462EA0fa94fC62300d3a8e","manifest":"0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0","commitments":"0xCf7Ed3AccA5a467e9e704C703E8D87F634fB0Fc9","genesis":1795676108,"params":{"epoch_seconds":86400,"dispute_bond":"100000000000000000000"}}"#;

    #[test]
    fn parses_the_scripts_line_and_a_minimal_file() {
        let d = Deployment::from_output(&format!("== Logs ==\n  DPOR_MARKET=0x1\n{SCRIPT_LINE}\n")).unwrap();
        assert_eq!(d.chain_id, 31337);
        assert_eq!(d.market, "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512".parse::<Address>().unwrap());
        assert_eq!(d.manifest, Some("0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0".parse().unwrap()));
        assert!(d.token_deployed && d.dev_seeds);
        let m = Deployment::parse(r#"{"chain_id": 11155111, "market": "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"}"#).unwrap();
        assert_eq!((m.chain_id, m.manifest, m.token), (11155111, None, None));
    }

    #[test]
    fn refuses_what_is_not_a_deployment() {
        assert!(matches!(Deployment::from_output("DPOR_MARKET=0x1\n"), Err(DeploymentError::NotInOutput)));
        assert!(Deployment::parse(r#"{"market": "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"}"#).unwrap_err().contains("chain_id"));
        assert!(Deployment::parse(r#"{"chain_id": 1}"#).unwrap_err().contains("market"));
        assert!(Deployment::parse(r#"{"chain_id": 1, "market": "0x12"}"#).is_err());
        let dir = std::env::temp_dir().join(format!("dpor-deployment-test-{}", std::process::id()));
        let e = Deployment::load(&dir.join("none.json")).unwrap_err().to_string();
        assert!(e.contains("cannot read the deployment file") && e.contains("none.json"), "{e}");
    }
}
