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
///         directly. Every other call goes on from its {fallback} to the commitments
///         extension ({DporCommitmentsExt}), installed once by the market's deployer.
contract DporMarketExt is ProviderRegistry, Disputes {
    /// @dev Who deployed the market: the only account that may install the commitments extension.
    address internal immutable _deployer;

    /// @dev Created by the market's constructor: msg.sender is the market.
    constructor(
        IERC20 token_,
        IRandomnessBeacon beacon_,
        MarketParams memory params,
        DporVerifier verifier_,
        uint64 genesis_,
        address deployer_
    ) MarketBase(token_, beacon_, params, verifier_, msg.sender, genesis_) {
        _deployer = deployer_;
    }

    /// @notice Installs the commitments extension ({DporCommitmentsExt}) the market's
    ///         fallback reaches through this one (docs/CONTRACTS.md §9). Once.
    /// @dev Only the market's deployer ({NotDeployer}), once ({AlreadyInstalled}), a
    ///      contract built for this market (`home() == market`, else {InvalidParameter}).
    ///      Emits {CommitmentsInstalled}.
    /// @param ext The DporCommitmentsExt deployed with this market's address.
    function installCommitments(address ext) external {
        _onlyHome();
        if (msg.sender != _deployer) revert NotDeployer();
        if (_commitments != address(0)) revert AlreadyInstalled();
        if (ext.code.length == 0 || IHome(ext).home() != address(this)) revert InvalidParameter();
        _commitments = ext;
        emit CommitmentsInstalled(ext);
    }

    /// @notice The installed commitments extension (address(0) before installation).
    function commitments() external view returns (address) {
        return _commitments;
    }

    /// @notice Every function defined in neither the market nor here (epoch commitments,
    ///         challenges, claimEpochs, closeDeal) runs in the commitments extension's code
    ///         with the market's storage (delegatecall); reverts {NotInstalled} before
    ///         {installCommitments}. Return and revert data pass through unchanged.
    fallback() external {
        address c = _commitments;
        if (c == address(0)) revert NotInstalled();
        assembly ("memory-safe") {
            calldatacopy(0, 0, calldatasize())
            let ok := delegatecall(gas(), c, 0, calldatasize(), 0, 0)
            returndatacopy(0, 0, returndatasize())
            if iszero(ok) { revert(0, returndatasize()) }
            return(0, returndatasize())
        }
    }
}

/// @dev What {DporMarketExt.installCommitments} asks of a commitments extension.
interface IHome {
    /// @notice The market the extension was built for.
    function home() external view returns (address);
}
