//! The owner's placement and repair decisions, as pure functions: which providers get a
//! file's shards ([`pick_providers`]) and when a shard no longer protects its file
//! ([`needs_repair`], [`chain_reason`], [`unreachable_due`], [`can_rebuild`]).
//!
//! `dpor put`, `dpor repair` and `dpor watch --repair` (verifier-cli, `disperse`) read
//! the registry, the deals and the nodes, then call these; the network simulator
//! (`dpor-sim`, docs/SIMULATION.md) calls the same functions on its model of them, so the
//! figures it gives are those of the code the owners run. No I/O, no async, no chain.

use std::fmt;

/// One registered provider as the registry shows it: a candidate for a shard.
///
/// `A` is the provider's identity (an address on chain, an index in the simulator),
/// `P` its node's peer id (bytes on chain), `S` a stake amount (a 256-bit integer on chain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate<A, P, S = u128> {
    /// The provider.
    pub id: A,
    /// Its node's peer id (two providers with one peer id are one node).
    pub peer: P,
    /// Still registered.
    pub registered: bool,
    /// Its stake (token base units).
    pub stake: S,
    /// Free capacity, blocks (capacity − used).
    pub free_blocks: u64,
    /// Its price per block per epoch (token base units).
    pub price: u128,
    /// Its collateral per block (token base units).
    pub collateral: u128,
}

/// What a shard's provider must offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terms<S = u128> {
    /// The shard's size in blocks.
    pub blocks: u64,
    /// The market's minimum stake (token base units).
    pub min_stake: S,
    /// Only providers asking at most this price per block per epoch.
    pub max_price: Option<u128>,
    /// Only providers locking at least this collateral per block.
    pub min_collateral: Option<u128>,
}

/// Why a candidate was not chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It is the owner itself.
    IsOwner,
    /// It holds, or held, a shard of the file.
    HoldsShard,
    /// No longer registered.
    NotRegistered,
    /// Its stake is below the market's minimum.
    LowStake,
    /// Its free blocks (the field) are fewer than the shard's `needed`.
    NoSpace {
        /// Free blocks.
        free: u64,
        /// The shard's blocks.
        needed: u64,
    },
    /// It asks this price per block per epoch, above the maximum.
    Price(u128),
    /// It locks only this collateral per block, below the minimum.
    Collateral(u128),
    /// It shares a peer id with a provider chosen or holding a shard.
    SharesPeer,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::IsOwner => write!(f, "is the owner"),
            Refusal::HoldsShard => write!(f, "already holds a shard of this file"),
            Refusal::NotRegistered => write!(f, "is no longer registered"),
            Refusal::LowStake => write!(f, "has less than the minimum stake"),
            Refusal::NoSpace { free, needed } => write!(f, "has {free} free blocks, a shard needs {needed}"),
            Refusal::Price(p) => write!(f, "asks {p} per block per epoch"),
            Refusal::Collateral(c) => write!(f, "locks only {c} collateral per block"),
            Refusal::SharesPeer => write!(f, "shares a peer id with a provider already chosen or holding a shard"),
        }
    }
}

/// Fewer candidates qualify than shards need a home: how many did, and why each other
/// candidate (its index in the slice given) was refused, in the order examined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall {
    /// Candidates chosen before running out.
    pub chosen: usize,
    /// (candidate index, why not).
    pub refused: Vec<(usize, Refusal)>,
}

/// Why a candidate cannot take a shard, from its own record alone (`None`: it can).
pub fn refusal<A: PartialEq, P, S: PartialOrd>(
    c: &Candidate<A, P, S>,
    terms: &Terms<S>,
    owner: Option<&A>,
    exclude: &[A],
) -> Option<Refusal> {
    if owner == Some(&c.id) {
        Some(Refusal::IsOwner)
    } else if exclude.contains(&c.id) {
        Some(Refusal::HoldsShard)
    } else if !c.registered {
        Some(Refusal::NotRegistered)
    } else if c.stake < terms.min_stake {
        Some(Refusal::LowStake)
    } else if c.free_blocks < terms.blocks {
        Some(Refusal::NoSpace { free: c.free_blocks, needed: terms.blocks })
    } else if terms.max_price.is_some_and(|m| c.price > m) {
        Some(Refusal::Price(c.price))
    } else if terms.min_collateral.is_some_and(|m| c.collateral < m) {
        Some(Refusal::Collateral(c.collateral))
    } else {
        None
    }
}

/// Picks `n` providers for shards of `terms.blocks` blocks each among `candidates`:
/// registered, with the stake, the free capacity, a price ≤ `max_price` and collateral
/// ≥ `min_collateral`; never `owner`, never one in `exclude` (the providers that hold,
/// or held, a shard of the file) nor one whose peer id is in `exclude_peers` (theirs),
/// never two with one peer id. Cheapest first, ties by id.
///
/// Returns the indices of the chosen candidates in `candidates`, cheapest first.
///
/// # Errors
/// [`Shortfall`] when fewer than `n` qualify.
pub fn pick_providers<A: Ord, P: PartialEq, S: PartialOrd>(
    candidates: &[Candidate<A, P, S>],
    n: usize,
    terms: &Terms<S>,
    owner: Option<&A>,
    exclude: &[A],
    exclude_peers: &[&P],
) -> Result<Vec<usize>, Shortfall> {
    let mut refused = Vec::new();
    let mut ok = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        match refusal(c, terms, owner, exclude) {
            Some(r) => refused.push((i, r)),
            None => ok.push(i),
        }
    }
    ok.sort_by(|&x, &y| candidates[x].price.cmp(&candidates[y].price).then(candidates[x].id.cmp(&candidates[y].id)));
    let mut peers: Vec<&P> = exclude_peers.to_vec();
    let mut chosen = Vec::with_capacity(n);
    if n == 0 {
        return Ok(chosen);
    }
    for i in ok {
        let peer = &candidates[i].peer;
        if peers.contains(&peer) {
            refused.push((i, Refusal::SharesPeer));
            continue;
        }
        peers.push(peer);
        chosen.push(i);
        if chosen.len() == n {
            return Ok(chosen);
        }
    }
    Err(Shortfall { chosen: chosen.len(), refused })
}

/// The owner's repair thresholds (`dpor repair` / `dpor watch --repair` options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairRules {
    /// Faults a shard's deal may count and still be healthy (`--max-faults`, default 0).
    pub max_faults: u16,
    /// Epochs (chain time) a node may stay unreachable before its shard is repaired
    /// (`--unreachable-epochs`, default 0: at once).
    pub unreachable_epochs: u64,
}

/// Why a shard needs repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The owner named it (`--shard`).
    Asked,
    /// Its deal is no longer `Active` (completed, terminated, cancelled, exited).
    DealEnded,
    /// Its deal counted this many faults, more than `max_faults`.
    Faulted(u16),
    /// Its node has not answered for at least `unreachable_epochs` epochs.
    Unreachable,
}

/// What the owner knows of one shard at a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardObservation {
    /// The owner named it for repair.
    pub asked: bool,
    /// Its deal is `Active` on chain.
    pub deal_active: bool,
    /// Faults its deal counted (missed epochs, lost disputes or challenges).
    pub faults: u16,
    /// Chain time (seconds) of the first failed probe of its node in the current run of
    /// failures; `None` if its node answered the last probe.
    pub unreachable_since: Option<u64>,
}

/// Rules 0–2 of `dpor repair`, from the chain alone (checked in this order): named by
/// the owner, deal not `Active`, more than `max_faults` faults. `None`: the node must
/// be probed (rule 3, [`unreachable_due`]).
pub fn chain_reason(asked: bool, deal_active: bool, faults: u16, rules: &RepairRules) -> Option<Reason> {
    if asked {
        Some(Reason::Asked)
    } else if !deal_active {
        Some(Reason::DealEnded)
    } else if faults > rules.max_faults {
        Some(Reason::Faulted(faults))
    } else {
        None
    }
}

/// Rule 3: a node unreachable since chain time `since` (seconds) is due for repair at
/// `now` once `unreachable_epochs` epochs of `epoch_seconds` have passed (at once with 0).
pub fn unreachable_due(since: u64, now: u64, rules: &RepairRules, epoch_seconds: u64) -> bool {
    now.saturating_sub(since) >= rules.unreachable_epochs.saturating_mul(epoch_seconds)
}

/// All four rules on one observation at chain time `now`: `Some(reason)` if the shard
/// must be rebuilt and moved, `None` if it protects the file (or is within the
/// unreachable grace period).
pub fn needs_repair(obs: &ShardObservation, rules: &RepairRules, now: u64, epoch_seconds: u64) -> Option<Reason> {
    if let Some(r) = chain_reason(obs.asked, obs.deal_active, obs.faults, rules) {
        return Some(r);
    }
    match obs.unreachable_since {
        Some(since) if unreachable_due(since, now, rules, epoch_seconds) => Some(Reason::Unreachable),
        _ => None,
    }
}

/// Whether `bad` shards of a k-of-n file can be rebuilt at once from the others (at most
/// n − k). More than that and the file cannot be decoded from what remains.
pub fn can_rebuild(bad: usize, k: u16, n: u16) -> bool {
    bad <= usize::from(n.saturating_sub(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(id: u32, peer: u32, price: u128) -> Candidate<u32, u32> {
        Candidate { id, peer, registered: true, stake: 10, free_blocks: 100, price, collateral: 5 }
    }

    const T: Terms = Terms { blocks: 50, min_stake: 10, max_price: None, min_collateral: None };

    #[test]
    fn cheapest_first_ties_by_id() {
        let c = vec![cand(5, 5, 3), cand(2, 2, 1), cand(9, 9, 1), cand(1, 1, 2)];
        assert_eq!(pick_providers(&c, 3, &T, None, &[], &[]), Ok(vec![1, 2, 3]));
    }

    #[test]
    fn every_refusal_in_the_order_of_the_cli() {
        let mut c =
            vec![cand(0, 0, 1), cand(1, 1, 1), cand(2, 2, 1), cand(3, 3, 1), cand(4, 4, 1), cand(5, 5, 9), cand(6, 6, 1), cand(7, 0, 1)];
        c[2].registered = false;
        c[3].stake = 9;
        c[4].free_blocks = 49;
        c[6].collateral = 4;
        let t = Terms { max_price: Some(8), min_collateral: Some(5), ..T };
        let e = pick_providers(&c, 2, &t, Some(&0), &[1], &[]).unwrap_err();
        assert_eq!(e.chosen, 1);
        assert_eq!(
            e.refused,
            vec![
                (0, Refusal::IsOwner),
                (1, Refusal::HoldsShard),
                (2, Refusal::NotRegistered),
                (3, Refusal::LowStake),
                (4, Refusal::NoSpace { free: 49, needed: 50 }),
                (5, Refusal::Price(9)),
                (6, Refusal::Collateral(4)),
            ]
        );
        // Candidate 7 shares peer 0 with the owner, but the owner is not a peer to
        // exclude: it is chosen.
        assert_eq!(pick_providers(&c, 1, &t, Some(&0), &[1], &[]), Ok(vec![7]));
    }

    #[test]
    fn never_two_with_one_peer_nor_a_holders_peer() {
        let c = vec![cand(1, 7, 1), cand(2, 7, 2), cand(3, 8, 3), cand(4, 9, 4)];
        assert_eq!(pick_providers(&c, 2, &T, None, &[], &[&8]), Ok(vec![0, 3]));
        let e = pick_providers(&c, 3, &T, None, &[], &[&8]).unwrap_err();
        assert_eq!(e, Shortfall { chosen: 2, refused: vec![(1, Refusal::SharesPeer), (2, Refusal::SharesPeer)] });
        assert_eq!(pick_providers(&c, 0, &T, None, &[], &[]), Ok(vec![]));
    }

    #[test]
    fn the_repair_rules_in_order() {
        let r = RepairRules { max_faults: 1, unreachable_epochs: 2 };
        let healthy = ShardObservation { asked: false, deal_active: true, faults: 1, unreachable_since: None };
        assert_eq!(needs_repair(&healthy, &r, 1_000, 100), None);
        assert_eq!(needs_repair(&ShardObservation { asked: true, deal_active: false, ..healthy }, &r, 0, 100), Some(Reason::Asked));
        assert_eq!(needs_repair(&ShardObservation { deal_active: false, faults: 5, ..healthy }, &r, 0, 100), Some(Reason::DealEnded));
        assert_eq!(needs_repair(&ShardObservation { faults: 2, ..healthy }, &r, 0, 100), Some(Reason::Faulted(2)));
        let away = ShardObservation { unreachable_since: Some(1_000), ..healthy };
        assert_eq!(needs_repair(&away, &r, 1_199, 100), None);
        assert_eq!(needs_repair(&away, &r, 1_200, 100), Some(Reason::Unreachable));
        let at_once = RepairRules { max_faults: 0, unreachable_epochs: 0 };
        assert!(unreachable_due(1_000, 1_000, &at_once, 100));
        assert!(!unreachable_due(1_000, 999, &r, 100));
    }

    #[test]
    fn at_most_n_minus_k_rebuilt_at_once() {
        assert!(can_rebuild(2, 4, 6));
        assert!(!can_rebuild(3, 4, 6));
        assert!(can_rebuild(0, 3, 3));
        assert!(!can_rebuild(1, 3, 3));
    }
}
