//! The crate's error type.

use alloy_primitives::B256;
use thiserror::Error;

/// Errors of the chain client. A contract revert carries the custom error's NAME
/// (e.g. `StaleVersion`, see `contracts/src/market/IDporMarket.sol`), so a CLI can print
/// "the contract rejected postDigest: StaleVersion".
#[derive(Debug, Error)]
pub enum ChainError {
    /// The RPC URL did not parse.
    #[error("invalid RPC URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL given.
        url: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A private key did not parse (expects 32 bytes of hex, `0x` optional).
    #[error("invalid private key: {0}")]
    InvalidKey(String),
    /// A transaction was requested from a [`crate::Market`] built without a signer.
    #[error("{0} needs a signer, but this client was connected without a private key")]
    NoSigner(&'static str),
    /// The contract reverted (at gas estimation, in an `eth_call`, or in a mined
    /// transaction); `error` is the decoded custom error name (`StaleVersion`,
    /// `ERC20InsufficientAllowance`, …) or, when it could not be decoded, the raw reason.
    #[error("the contract rejected {method}: {error}")]
    Reverted {
        /// The contract function called (`postDigest`).
        method: &'static str,
        /// The custom error's name, or a description of the undecoded revert.
        error: String,
    },
    /// A transaction was mined but failed (status 0), e.g. because the chain moved on
    /// between gas estimation and inclusion (another party's transaction came first).
    /// `gas_used` equal to `gas_limit` points to running out of gas; the limit is the
    /// estimate plus [`crate::client::gas_with_margin`]'s margin.
    #[error("{method} transaction {tx} was mined but reverted (gas used {gas_used} of a limit of {gas_limit})")]
    TxFailed {
        /// The contract function called.
        method: &'static str,
        /// The transaction hash.
        tx: B256,
        /// Gas the failed transaction used.
        gas_used: u64,
        /// The transaction's gas limit.
        gas_limit: u64,
    },
    /// The JSON-RPC endpoint failed (connection, timeout, malformed answer).
    #[error("RPC error in {method}: {message}")]
    Rpc {
        /// What was being done.
        method: &'static str,
        /// The transport's message.
        message: String,
    },
    /// A receipt lacked the event the call must emit (should not happen with the
    /// contract of chain/abi).
    #[error("{method}: no {event} event in the receipt")]
    MissingEvent {
        /// The contract function called.
        method: &'static str,
        /// The event expected.
        event: &'static str,
    },
    /// A value from the chain did not fit the Rust type (e.g. an id above u64).
    #[error("unexpected value from the chain: {0}")]
    Decode(String),
    /// A sample proof could not be built or did not verify locally.
    #[error("sample proof: {0}")]
    Proof(String),
}

impl ChainError {
    /// The contract's custom error name if this is a revert (`Some("StaleVersion")`).
    pub fn revert_name(&self) -> Option<&str> {
        match self {
            ChainError::Reverted { error, .. } => Some(error.as_str()),
            _ => None,
        }
    }
}
