// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {MarketBase} from "./MarketBase.sol";
import {EpochCommitments} from "./EpochCommitments.sol";
import {UploadExit} from "./UploadExit.sol";
import {DporVerifier} from "./DporVerifier.sol";
import {IDporMarketFull} from "./IDporMarket.sol";
import {MarketParams} from "../lib/DporTypes.sol";

/// @notice The parameters `market` was deployed with, read from its getters.
function marketParamsOf(IDporMarketFull market) view returns (MarketParams memory p) {
    p.epochSeconds = market.epochSeconds();
    p.answerSeconds = market.answerSeconds();
    p.graceSeconds = market.graceSeconds();
    p.uploadSeconds = market.uploadSeconds();
    p.exitNoticeEpochs = market.exitNoticeEpochs();
    p.disputeBond = market.disputeBond();
    p.challengerShareBps = market.challengerShareBps();
    p.maxFailures = market.maxFailures();
    p.minStake = market.minStake();
}

/// @title DporCommitmentsExt
/// @notice The market's second extension: epoch commitments, challenges, safety draws,
///         claimEpochs and closeDeal ({EpochCommitments}; docs/COMMITMENTS.md), run by
///         delegatecall in the market's storage. Calls reach it as
///         market.fallback → {DporMarketExt}.fallback → here (both delegatecalls, so the
///         market's storage and msg.sender throughout).
/// @dev Deployed separately, after the market (the market's init code, which carries
///      {DporMarketExt} and {DporVerifier}, has no room left under EIP-3860's 49,152
///      bytes), then installed once by the market's deployer
///      (`installCommitments`, docs/CONTRACTS.md §9). Its constructor copies every
///      immutable from `market` (genesis included), so the grid, durations, bond and
///      token are the market's. State-changing functions revert {WrongContext} when
///      called directly.
contract DporCommitmentsExt is EpochCommitments, UploadExit {
    /// @param market The DporMarket this extension serves.
    constructor(IDporMarketFull market)
        MarketBase(
            IERC20(market.token()),
            market.beacon(),
            marketParamsOf(market),
            DporVerifier(market.verifier()),
            address(market),
            market.genesis()
        )
    {}

    /// @notice The market this extension serves (its delegatecall context).
    function home() external view returns (address) {
        return _home;
    }
}
