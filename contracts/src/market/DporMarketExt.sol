// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {MarketBase} from "./MarketBase.sol";
import {ProviderRegistry} from "./ProviderRegistry.sol";
import {Disputes} from "./Disputes.sol";
import {DporVerifier} from "./DporVerifier.sol";
import {IRandomnessBeacon} from "./IRandomnessBeacon.sol";
import {MarketParams} from "../lib/DporTypes.sol";

/// @title DporMarketExt
/// @notice Providers, audit records and disputes of a {DporMarket}, run by delegatecall
///         from the market's fallback in the market's storage (same {MarketBase}
///         layout and the same immutables, passed by the market's constructor). Its
///         state-changing functions revert {IDporMarket.WrongContext} when called
///         directly.
contract DporMarketExt is ProviderRegistry, Disputes {
    /// @dev Created by the market's constructor: msg.sender is the market.
    constructor(IERC20 token_, IRandomnessBeacon beacon_, MarketParams memory params, DporVerifier verifier_)
        MarketBase(token_, beacon_, params, verifier_, msg.sender)
    {}
}
