//! [`Market`]: a typed client of one deployed `DporMarket` (and its token) over HTTP
//! JSON-RPC, with an optional local signer. The calls themselves live in
//! `provider_ops`, `owner_ops`, `auditor_ops`, `token_ops` and `logs`; this file has
//! the connection and the plumbing: sending, waiting for receipts, decoding reverts.

use crate::bindings::{DporMarket, FileManifest, TestToken};
use crate::error::ChainError;
use alloy::contract::{CallBuilder, CallDecoder};
use alloy::network::EthereumWallet;
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::types::TransactionReceipt;
use alloy::signers::local::PrivateKeySigner;
use alloy::transports::http::reqwest::Url;
use alloy_primitives::{Address, U256};
use alloy_sol_types::SolError;
use std::time::Duration;

/// How long a transaction may stay unmined before [`ChainError::Rpc`] (a timeout).
pub const RECEIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// The gas limit sent for a transaction whose `eth_estimateGas` gave `estimate`: the
/// estimate plus 30 % of it, and at least 40,000 gas more, but never above `cap` (the
/// chain's block gas limit: a transaction over it is refused) unless the estimate
/// itself is.
///
/// An estimate is exact for the state it ran on, and other parties' transactions can be
/// mined between it and ours: a provider withdrawing what it is owed turns the next
/// credit to it from a 2,900-gas into a 20,000-gas `SSTORE` (EIP-2200), a new epoch makes
/// a first write of the epoch's bookkeeping. Sent at the bare estimate, such a
/// transaction ran out of gas in CI (`resizeDeal`, while the node settled and withdrew
/// an epoch). Unused gas is not paid for (EIP-1559 charges gas used), so the margin
/// costs nothing; 1.3× is `forge script`'s default multiplier.
pub fn gas_with_margin(estimate: u64, cap: u64) -> u64 {
    let margin = (estimate / 10 * 3).max(40_000);
    estimate.saturating_add(margin).min(cap.max(estimate))
}

/// The cap of [`gas_with_margin`] when the chain's block gas limit could not be read at
/// [`Market::connect`]: 30 M gas, anvil's default block gas limit.
pub const MAX_GAS_LIMIT: u64 = 30_000_000;

/// A client of the market at one address: views, transactions (which wait for their
/// receipt) and log queries. Cheap to clone (the HTTP client is shared).
///
/// Every transaction needs the signer given to [`Market::connect`]
/// ([`ChainError::NoSigner`] otherwise); reverts come back as
/// [`ChainError::Reverted`] with the contract's custom error name.
#[derive(Clone)]
pub struct Market {
    pub(crate) provider: DynProvider,
    pub(crate) market: DporMarket::DporMarketInstance<DynProvider>,
    pub(crate) token: TestToken::TestTokenInstance<DynProvider>,
    pub(crate) signer: Option<PrivateKeySigner>,
    pub(crate) chain_id: u64,
    rpc_url: String,
    /// Transactions, gas and transport errors of this client and its clones.
    pub(crate) stats: std::sync::Arc<crate::stats::ChainStats>,
    /// The highest gas limit a transaction is sent with ([`gas_with_margin`]'s cap):
    /// the latest block's gas limit when this client connected, else [`MAX_GAS_LIMIT`].
    pub(crate) gas_cap: u64,
    /// The block every contract read ([`Market::view`]) is made at, if pinned
    /// ([`Market::at_block`]); else the latest.
    pinned: Option<u64>,
}

impl std::fmt::Debug for Market {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Market")
            .field("rpc_url", &self.rpc_url)
            .field("market", self.market.address())
            .field("token", self.token.address())
            .field("chain_id", &self.chain_id)
            .field("account", &self.signer.as_ref().map(|s| s.address()))
            .finish()
    }
}

impl Market {
    /// Connects to the market at `market` through the JSON-RPC endpoint `rpc_url`
    /// (`http://127.0.0.1:8545`), reading the chain id and the market's token
    /// (`token()`). With `signer`, transactions are signed locally by it.
    ///
    /// Errors: [`ChainError::InvalidUrl`]; [`ChainError::Rpc`] if the node does not
    /// answer; [`ChainError::Reverted`] / `Rpc` if `market` is not a DporMarket.
    pub async fn connect(rpc_url: &str, market: Address, signer: Option<PrivateKeySigner>) -> Result<Market, ChainError> {
        let url: Url = rpc_url
            .parse()
            .map_err(|e: url_error::ParseError| ChainError::InvalidUrl { url: rpc_url.to_string(), reason: e.to_string() })?;
        // Nonces from `eth_getTransactionCount(pending)` on every send (not alloy's default
        // cache): a send whose gas estimation reverts then leaves no nonce gap, and several
        // clients may share a key.
        let provider = match &signer {
            Some(s) => ProviderBuilder::new()
                .disable_recommended_fillers()
                .with_gas_estimation()
                .with_simple_nonce_management()
                .fetch_chain_id()
                .wallet(EthereumWallet::from(s.clone()))
                .connect_http(url)
                .erased(),
            None => ProviderBuilder::new().connect_http(url).erased(),
        };
        let stats = std::sync::Arc::new(crate::stats::ChainStats::default());
        let chain_id = stats.note(provider.get_chain_id().await.map_err(|e| rpc_err("eth_chainId", e)))?;
        let market_inst = DporMarket::new(market, provider.clone());
        let token_addr = stats.note(market_inst.token().call().await.map_err(|e| contract_err("token", e)))?;
        let token = TestToken::new(token_addr, provider.clone());
        // The block gas limit caps our gas limits; a read-only client sends nothing.
        let gas_cap = match &signer {
            Some(_) => match provider.get_block_by_number(alloy::eips::BlockNumberOrTag::Latest).await {
                Ok(Some(b)) if b.header.gas_limit > 0 => b.header.gas_limit,
                _ => MAX_GAS_LIMIT,
            },
            None => MAX_GAS_LIMIT,
        };
        Ok(Market { provider, market: market_inst, token, signer, chain_id, rpc_url: rpc_url.to_string(), stats, gas_cap, pinned: None })
    }

    /// The JSON-RPC URL this client talks to.
    pub fn rpc_url(&self) -> &str {
        &self.rpc_url
    }

    /// The market contract's address (the EIP-712 verifying contract).
    pub fn address(&self) -> Address {
        *self.market.address()
    }

    /// The ERC-20 of escrow, collateral, stakes and bonds (`market.token()`).
    pub fn token_address(&self) -> Address {
        *self.token.address()
    }

    /// What this client and its clones did on chain: transactions and their gas per
    /// method, transport errors ([`crate::stats::ChainStats`]).
    pub fn stats(&self) -> &crate::stats::ChainStats {
        &self.stats
    }

    /// The chain id (`eth_chainId`), part of the EIP-712 domain.
    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    /// The signer's address, if this client has one.
    pub fn account(&self) -> Option<Address> {
        self.signer.as_ref().map(|s| s.address())
    }

    /// The signer, if any (e.g. to co-sign digests with [`crate::sign_digest`]).
    pub fn signer(&self) -> Option<&PrivateKeySigner> {
        self.signer.as_ref()
    }

    /// The signer's address, or [`ChainError::NoSigner`] naming `method`.
    pub(crate) fn require_account(&self, method: &'static str) -> Result<Address, ChainError> {
        self.account().ok_or(ChainError::NoSigner(method))
    }

    /// The current block number.
    pub async fn block_number(&self) -> Result<u64, ChainError> {
        self.stats.note(self.provider.get_block_number().await.map_err(|e| rpc_err("eth_blockNumber", e)))
    }

    /// The latest block's timestamp (seconds): "now" for the market's time checks
    /// (the next transaction's block has a timestamp at least this).
    pub async fn latest_timestamp(&self) -> Result<u64, ChainError> {
        use alloy::eips::BlockNumberOrTag;
        let b = self.stats.note(
            self.provider
                .get_block_by_number(BlockNumberOrTag::Latest)
                .await
                .map_err(|e| rpc_err("eth_getBlockByNumber", e))
                .and_then(|b| b.ok_or_else(|| rpc_err("eth_getBlockByNumber", "no latest block"))),
        )?;
        Ok(b.header.timestamp)
    }

    /// Sends a transaction from the signer, waits for its receipt (up to
    /// [`RECEIPT_TIMEOUT`]) and checks its status.
    pub(crate) async fn send<D: CallDecoder>(
        &self,
        method: &'static str,
        call: CallBuilder<&DynProvider, D>,
    ) -> Result<TransactionReceipt, ChainError> {
        let from = self.require_account(method)?;
        let call = call.from(from);
        let gas_limit = match self.stats.note(call.estimate_gas().await.map_err(|e| contract_err(method, e))) {
            Ok(estimate) => gas_with_margin(estimate, self.gas_cap),
            Err(e) => {
                self.stats.record_tx(method, None, false);
                return Err(e);
            }
        };
        let pending = match self.stats.note(call.gas(gas_limit).send().await.map_err(|e| contract_err(method, e))) {
            Ok(p) => p,
            Err(e) => {
                self.stats.record_tx(method, None, false);
                return Err(e);
            }
        };
        let receipt = match self.stats.note(
            pending
                .with_timeout(Some(RECEIPT_TIMEOUT))
                .get_receipt()
                .await
                .map_err(|e| ChainError::Rpc { method, message: e.to_string() }),
        ) {
            Ok(r) => r,
            Err(e) => {
                self.stats.record_tx(method, None, false);
                return Err(e);
            }
        };
        self.stats.record_tx(method, Some(receipt.gas_used), receipt.status());
        if !receipt.status() {
            return Err(ChainError::TxFailed { method, tx: receipt.transaction_hash, gas_used: receipt.gas_used, gas_limit });
        }
        tracing::debug!(method, tx = %receipt.transaction_hash, block = ?receipt.block_number, "mined");
        Ok(receipt)
    }

    /// Runs a view (`eth_call` at the latest block).
    pub(crate) async fn view<D: CallDecoder>(
        &self,
        method: &'static str,
        call: CallBuilder<&DynProvider, D>,
    ) -> Result<D::CallOutput, ChainError> {
        let call = match self.pinned {
            Some(block) => call.block(alloy::eips::BlockId::number(block)),
            None => call,
        };
        self.stats.note(call.call().await.map_err(|e| contract_err(method, e)))
    }

    /// This client with every contract read (deals, epochs, disputes, balances, `owed`)
    /// made at block `block` instead of the latest (`eth_call` at that block), so that
    /// several reads and the logs up to `block` describe one state: a reader that sums
    /// payment logs up to a block and reads the epochs' status at the latest one can
    /// see an epoch proven before its pay. Transactions, logs and the block number are
    /// unaffected. An RPC node must still hold that block's state (recent blocks do).
    pub fn at_block(&self, block: u64) -> Market {
        Market { pinned: Some(block), ..self.clone() }
    }
}

/// Alias so the URL error type has a name without depending on `url` directly.
mod url_error {
    pub use alloy::transports::http::reqwest::Url;
    pub type ParseError = <Url as std::str::FromStr>::Err;
}

/// A transport error as [`ChainError::Rpc`].
pub(crate) fn rpc_err(method: &'static str, e: impl std::fmt::Display) -> ChainError {
    ChainError::Rpc { method, message: e.to_string() }
}

/// A contract error: a revert (decoded to the custom error's name) or a transport error.
pub(crate) fn contract_err(method: &'static str, e: alloy::contract::Error) -> ChainError {
    if let Some(data) = e.as_revert_data() {
        return ChainError::Reverted { method, error: revert_reason(&data) };
    }
    if let alloy::contract::Error::TransportError(t) = &e {
        if let Some(resp) = t.as_error_resp() {
            if resp.message.contains("revert") {
                return ChainError::Reverted { method, error: resp.message.to_string() };
            }
        }
    }
    rpc_err(method, e)
}

/// The name of the custom error in revert data (market errors, then the token's
/// ERC-20 errors, which `SafeERC20` bubbles up, then the file manifest's), a `require`
/// string, a panic code, or the raw hex.
pub fn revert_reason(data: &[u8]) -> String {
    if data.len() >= 4 {
        let sel: [u8; 4] = [data[0], data[1], data[2], data[3]];
        if let Some(name) = DporMarket::DporMarketErrors::name_by_selector(sel) {
            return name.to_string();
        }
        if let Some(name) = TestToken::TestTokenErrors::name_by_selector(sel) {
            return name.to_string();
        }
        if let Some(name) = FileManifest::FileManifestErrors::name_by_selector(sel) {
            return name.to_string();
        }
        if let Ok(r) = alloy_sol_types::Revert::abi_decode(data) {
            return format!("revert: {}", r.reason);
        }
        if let Ok(p) = alloy_sol_types::Panic::abi_decode(data) {
            return format!("panic 0x{:x}", p.code);
        }
    }
    format!("undecoded revert data 0x{}", alloy_primitives::hex::encode(data))
}

/// A uint256 id or amount that must fit u64.
pub(crate) fn to_u64(v: U256) -> Result<u64, ChainError> {
    u64::try_from(v).map_err(|_| ChainError::Decode(format!("{v} does not fit u64")))
}
