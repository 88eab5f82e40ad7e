//! Token calls (the market's ERC-20; `mint` exists only on the local `TestToken`).
//! Amounts are in base units (wei, 18 decimals).

use crate::client::Market;
use crate::error::ChainError;
use alloy_primitives::{Address, B256, U256};

impl Market {
    /// Mints `amount` test tokens to `to` (`TestToken.mint`, anyone may call it; local
    /// chains only). Returns the transaction hash.
    pub async fn mint(&self, to: Address, amount: U256) -> Result<B256, ChainError> {
        let r = self.send("mint", self.token.mint(to, amount)).await?;
        Ok(r.transaction_hash)
    }

    /// Approves the market to pull `amount` of the signer's tokens (stake, collateral,
    /// escrow, dispute bonds). Replaces any previous allowance.
    pub async fn approve_market(&self, amount: U256) -> Result<B256, ChainError> {
        let r = self.send("approve", self.token.approve(self.address(), amount)).await?;
        Ok(r.transaction_hash)
    }

    /// Makes sure the market may pull at least `amount` from the signer, approving
    /// exactly `amount` if the current allowance is lower. Returns whether it approved.
    pub async fn ensure_allowance(&self, amount: U256) -> Result<bool, ChainError> {
        let me = self.require_account("approve")?;
        if self.allowance(me).await? >= amount {
            return Ok(false);
        }
        self.approve_market(amount).await?;
        Ok(true)
    }

    /// What the market may still pull from `owner`.
    pub async fn allowance(&self, owner: Address) -> Result<U256, ChainError> {
        self.view("allowance", self.token.allowance(owner, self.address())).await
    }

    /// Token balance of `account`.
    pub async fn balance_of(&self, account: Address) -> Result<U256, ChainError> {
        self.view("balanceOf", self.token.balanceOf(account)).await
    }
}
