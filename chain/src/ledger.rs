//! The market's events that settle a provider's epochs, disputes, challenges and
//! money, read in one `eth_getLogs` per block range ([`Market::ledger_events`]), so
//! that a node can count what the chain settled for its deals, whoever sent the
//! transaction (its own agent, an owner, a watcher): epochs proven, missed and excused,
//! disputes and challenges opened, answered and lost, tokens paid to it and slashed
//! from it (docs/OPERATIONS.md, "Metrics").

use crate::bindings::DporMarket;
use crate::client::{rpc_err, to_u64, Market};
use crate::error::ChainError;
use alloy::providers::Provider;
use alloy::rpc::types::{Filter, Log};
use alloy_primitives::B256;
use alloy_sol_types::SolEvent;

/// One settling event of a deal. Amounts in token base units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerEvent {
    /// `EpochProven`: a per-deal epoch proof was accepted; `payment` credited to the provider.
    EpochProven {
        /// The deal.
        deal: u64,
        /// The deal epoch.
        epoch: u64,
        /// Paid to the provider.
        payment: u128,
    },
    /// `EpochMissed`: an epoch was marked missed; `slashed` from the provider's collateral.
    EpochMissed {
        /// The deal.
        deal: u64,
        /// The deal epoch.
        epoch: u64,
        /// Taken from the provider (0 when no digest was in force).
        slashed: u128,
    },
    /// `EpochExcused`: a missed epoch excused by a late beacon round (no fault, no pay).
    EpochExcused {
        /// The deal.
        deal: u64,
    },
    /// `EpochsClaimed`: committed epochs paid (commitment mode); `proven` epochs, `pay` credited.
    EpochsClaimed {
        /// The deal.
        deal: u64,
        /// Epochs paid by this claim.
        proven: u64,
        /// Paid to the provider.
        pay: u128,
    },
    /// `UploadLockPaid`: a never-uploaded deal paid the provider for the capacity it held.
    UploadLockPaid {
        /// The deal.
        deal: u64,
        /// Paid to the provider.
        payment: u128,
    },
    /// `DisputeOpened` on the deal.
    DisputeOpened {
        /// The deal.
        deal: u64,
    },
    /// `DisputeAnswered`: the provider answered; the challenger's bond went to it.
    DisputeAnswered {
        /// The deal.
        deal: u64,
        /// The bond credited to the provider.
        bond: u128,
    },
    /// `DisputeSlashed`: unanswered; `slashed` (to the challenger and the owner) taken from the provider.
    DisputeSlashed {
        /// The deal.
        deal: u64,
        /// toChallenger + toOwner.
        slashed: u128,
    },
    /// `ChallengeOpened` on a committed entry of the deal.
    ChallengeOpened {
        /// The deal.
        deal: u64,
    },
    /// `ChallengeAnswered`: the entry's epoch is proven; `pay` and the challenger's `bond` credited to the provider.
    ChallengeAnswered {
        /// The deal.
        deal: u64,
        /// The epoch's payment.
        pay: u128,
        /// The bond credited to the provider (0 for a safety draw).
        bond: u128,
    },
    /// `ChallengeFaulted`: unanswered; the epoch is missed and `slashed` taken from the provider.
    ChallengeFaulted {
        /// The deal.
        deal: u64,
        /// toChallenger + toOwner.
        slashed: u128,
    },
    /// `DealClosed`: `faulted` epochs counted as faults at close, `slashed` for them.
    DealClosed {
        /// The deal.
        deal: u64,
        /// Epochs faulted at close.
        faulted: u64,
        /// Taken from the provider for them.
        slashed: u128,
    },
    /// `DealTerminated`: too many faults; the remaining collateral went to the owner.
    DealTerminated {
        /// The deal.
        deal: u64,
        /// Collateral given to the owner.
        collateral_to_owner: u128,
    },
}

impl LedgerEvent {
    /// The deal the event is about.
    pub fn deal(&self) -> u64 {
        match self {
            LedgerEvent::EpochProven { deal, .. }
            | LedgerEvent::EpochMissed { deal, .. }
            | LedgerEvent::EpochExcused { deal }
            | LedgerEvent::EpochsClaimed { deal, .. }
            | LedgerEvent::UploadLockPaid { deal, .. }
            | LedgerEvent::DisputeOpened { deal }
            | LedgerEvent::DisputeAnswered { deal, .. }
            | LedgerEvent::DisputeSlashed { deal, .. }
            | LedgerEvent::ChallengeOpened { deal }
            | LedgerEvent::ChallengeAnswered { deal, .. }
            | LedgerEvent::ChallengeFaulted { deal, .. }
            | LedgerEvent::DealClosed { deal, .. }
            | LedgerEvent::DealTerminated { deal, .. } => *deal,
        }
    }
}

fn decode<E: SolEvent>(l: &Log) -> Result<E, ChainError> {
    l.log_decode::<E>()
        .map(|d| d.inner.data)
        .map_err(|e| ChainError::Decode(format!("ledger logs: {e}")))
}

/// The ledger event of one log (`None` for a log of another event).
fn ledger_event(l: &Log) -> Result<Option<LedgerEvent>, ChainError> {
    use DporMarket as M;
    let Some(sig) = l.inner.data.topics().first().copied() else {
        return Ok(None);
    };
    let ev = if sig == M::EpochProven::SIGNATURE_HASH {
        let e = decode::<M::EpochProven>(l)?;
        LedgerEvent::EpochProven {
            deal: to_u64(e.dealId)?,
            epoch: e.epoch,
            payment: e.payment,
        }
    } else if sig == M::EpochMissed::SIGNATURE_HASH {
        let e = decode::<M::EpochMissed>(l)?;
        LedgerEvent::EpochMissed {
            deal: to_u64(e.dealId)?,
            epoch: e.epoch,
            slashed: e.slashed,
        }
    } else if sig == M::EpochExcused::SIGNATURE_HASH {
        LedgerEvent::EpochExcused {
            deal: to_u64(decode::<M::EpochExcused>(l)?.dealId)?,
        }
    } else if sig == M::EpochsClaimed::SIGNATURE_HASH {
        let e = decode::<M::EpochsClaimed>(l)?;
        LedgerEvent::EpochsClaimed {
            deal: to_u64(e.dealId)?,
            proven: u64::from(e.proven),
            pay: e.pay,
        }
    } else if sig == M::UploadLockPaid::SIGNATURE_HASH {
        let e = decode::<M::UploadLockPaid>(l)?;
        LedgerEvent::UploadLockPaid {
            deal: to_u64(e.dealId)?,
            payment: e.payment,
        }
    } else if sig == M::DisputeOpened::SIGNATURE_HASH {
        LedgerEvent::DisputeOpened {
            deal: to_u64(decode::<M::DisputeOpened>(l)?.dealId)?,
        }
    } else if sig == M::DisputeAnswered::SIGNATURE_HASH {
        let e = decode::<M::DisputeAnswered>(l)?;
        LedgerEvent::DisputeAnswered {
            deal: to_u64(e.dealId)?,
            bond: e.bondToProvider,
        }
    } else if sig == M::DisputeSlashed::SIGNATURE_HASH {
        let e = decode::<M::DisputeSlashed>(l)?;
        LedgerEvent::DisputeSlashed {
            deal: to_u64(e.dealId)?,
            slashed: e.toChallenger.saturating_add(e.toOwner),
        }
    } else if sig == M::ChallengeOpened::SIGNATURE_HASH {
        LedgerEvent::ChallengeOpened {
            deal: to_u64(decode::<M::ChallengeOpened>(l)?.dealId)?,
        }
    } else if sig == M::ChallengeAnswered::SIGNATURE_HASH {
        let e = decode::<M::ChallengeAnswered>(l)?;
        LedgerEvent::ChallengeAnswered {
            deal: to_u64(e.dealId)?,
            pay: e.pay,
            bond: e.bond,
        }
    } else if sig == M::ChallengeFaulted::SIGNATURE_HASH {
        let e = decode::<M::ChallengeFaulted>(l)?;
        LedgerEvent::ChallengeFaulted {
            deal: to_u64(e.dealId)?,
            slashed: e.toChallenger.saturating_add(e.toOwner),
        }
    } else if sig == M::DealClosed::SIGNATURE_HASH {
        let e = decode::<M::DealClosed>(l)?;
        LedgerEvent::DealClosed {
            deal: to_u64(e.dealId)?,
            faulted: u64::from(e.faultedEpochs),
            slashed: e.slashed,
        }
    } else if sig == M::DealTerminated::SIGNATURE_HASH {
        let e = decode::<M::DealTerminated>(l)?;
        LedgerEvent::DealTerminated {
            deal: to_u64(e.dealId)?,
            collateral_to_owner: e.collateralToOwner,
        }
    } else {
        return Ok(None);
    };
    Ok(Some(ev))
}

impl Market {
    /// Every [`LedgerEvent`] of the market (all deals) in blocks `from_block..=to_block`,
    /// oldest first, from one `eth_getLogs`. Errors: [`ChainError::Rpc`],
    /// [`ChainError::Decode`] (a log that does not decode as its event).
    pub async fn ledger_events(
        &self,
        from_block: u64,
        to_block: u64,
    ) -> Result<Vec<LedgerEvent>, ChainError> {
        use DporMarket as M;
        let sigs: Vec<B256> = vec![
            M::EpochProven::SIGNATURE_HASH,
            M::EpochMissed::SIGNATURE_HASH,
            M::EpochExcused::SIGNATURE_HASH,
            M::EpochsClaimed::SIGNATURE_HASH,
            M::UploadLockPaid::SIGNATURE_HASH,
            M::DisputeOpened::SIGNATURE_HASH,
            M::DisputeAnswered::SIGNATURE_HASH,
            M::DisputeSlashed::SIGNATURE_HASH,
            M::ChallengeOpened::SIGNATURE_HASH,
            M::ChallengeAnswered::SIGNATURE_HASH,
            M::ChallengeFaulted::SIGNATURE_HASH,
            M::DealClosed::SIGNATURE_HASH,
            M::DealTerminated::SIGNATURE_HASH,
        ];
        let filter = Filter::new()
            .address(self.address())
            .event_signature(sigs)
            .from_block(from_block)
            .to_block(to_block);
        let logs: Vec<Log> = self.stats.note(
            self.provider
                .get_logs(&filter)
                .await
                .map_err(|e| rpc_err("ledger logs", e)),
        )?;
        let mut out = Vec::with_capacity(logs.len());
        for l in &logs {
            if let Some(ev) = ledger_event(l)? {
                out.push(ev);
            }
        }
        Ok(out)
    }
}
