// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {MarketBase} from "./market/MarketBase.sol";
import {EpochProofs} from "./market/EpochProofs.sol";
import {DporMarketExt} from "./market/DporMarketExt.sol";
import {DporVerifier} from "./market/DporVerifier.sol";
import {IRandomnessBeacon} from "./market/IRandomnessBeacon.sol";
import {MarketParams} from "./lib/DporTypes.sol";

/// @title DporMarket
/// @notice Storage market for dynamic proofs of retrievability: providers, deals with
///         escrow and collateral, dual-signed digests with history, per-epoch whole-block
///         proofs on beacon seeds, audit records, disputes, slashing and exits. Also the
///         EIP-712 verifying contract of digests (domain name "dpor", version "1").
///         Its full ABI is {IDporMarket}; see docs/CONTRACTS.md.
/// @dev Four deployed contracts (EIP-170 code size, EIP-3860 init code size): this one
///      (deals, digests, epochs, seeds, exits), {DporMarketExt} (providers, audits,
///      disputes; reached through {fallback} by delegatecall, same storage layout) and the
///      stateless {DporVerifier}, both created by this constructor; and
///      {DporCommitmentsExt} (epoch commitments, challenges, claimEpochs, closeDeal),
///      deployed after the market and installed once by its deployer
///      (`installCommitments`), reached from {DporMarketExt}'s fallback by a second
///      delegatecall. All derive from {MarketBase}, the only contract declaring state.
contract DporMarket is EpochProofs {
    /// @notice The extension that runs the provider, audit and dispute functions in this
    ///         market's storage (delegatecall from {fallback}).
    DporMarketExt public immutable extension;

    /// @param token_ ERC-20 for escrow, collateral, stakes and bonds (no fee on transfer).
    /// @param beacon_ Randomness beacon (drand evmnet verifier); address(0) = dev mode
    ///        (blockhash seeds: grindable, local development only).
    /// @param params Durations, bond, shares, failures, stake; floors in docs/CONTRACTS.md §1.
    constructor(IERC20 token_, IRandomnessBeacon beacon_, MarketParams memory params)
        MarketBase(token_, beacon_, params, new DporVerifier(), address(this), uint64(block.timestamp))
    {
        extension = new DporMarketExt(token_, beacon_, params, verifier, uint64(block.timestamp), msg.sender);
    }

    /// @notice Every function not defined here (providers, audits, disputes, and through
    ///         the extension's own fallback the commitment functions) runs in
    ///         {extension}'s code with this market's storage (delegatecall); its return
    ///         data or revert data is passed through unchanged.
    fallback() external {
        address ext = address(extension);
        assembly ("memory-safe") {
            calldatacopy(0, 0, calldatasize())
            let ok := delegatecall(gas(), ext, 0, calldatasize(), 0, 0)
            returndatacopy(0, 0, returndatasize())
            if iszero(ok) { revert(0, returndatasize()) }
            return(0, returndatasize())
        }
    }
}
