// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {MarketBase} from "./market/MarketBase.sol";
import {Disputes} from "./market/Disputes.sol";

/// @title DporMarket
/// @notice Storage market for dynamic proofs of retrievability: providers, deals with
///         escrow and collateral, dual-signed digests, per-epoch sample proofs, audit
///         records, disputes and slashing. Also the EIP-712 verifying contract of digests
///         (domain name "dpor", version "1"). See docs/CONTRACTS.md.
contract DporMarket is Disputes {
    /// @param token_ ERC-20 for escrow, collateral, stakes and bonds.
    /// @param epochBlocks_ L1 blocks per epoch (1..256).
    /// @param disputeWindow_ Blocks a provider has to answer a dispute.
    /// @param disputeBond_ Bond of a dispute.
    /// @param challengerShareBps_ Challenger's share of a dispute slash (basis points).
    /// @param maxFailures_ Faults that terminate a deal.
    /// @param minStake_ Stake a provider needs to accept deals.
    constructor(
        IERC20 token_,
        uint64 epochBlocks_,
        uint64 disputeWindow_,
        uint128 disputeBond_,
        uint16 challengerShareBps_,
        uint16 maxFailures_,
        uint256 minStake_
    )
        MarketBase(token_, epochBlocks_, disputeWindow_, disputeBond_, challengerShareBps_, maxFailures_, minStake_)
        EIP712("dpor", "1")
    {}
}
