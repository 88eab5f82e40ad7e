// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title IRandomnessBeacon
/// @notice A verified public randomness beacon (drand `evmnet`: BLS on BN254, one
///         signature every period, verified on-chain with the pairing precompile and
///         stored once per round). The market reads its seeds from here (docs/CONTRACTS.md §5).
interface IRandomnessBeacon {
    /// Randomness of `round` (keccak/sha of its verified signature), bytes32(0) if not recorded yet.
    function randomness(uint64 round) external view returns (bytes32);
    /// The first round whose emission time is >= `timestamp` (drand: round r is emitted at genesis + (r-1)*period).
    function roundAt(uint256 timestamp) external view returns (uint64);
    /// When `round` was first recorded (block.timestamp of its first relay; it never changes), 0 if not recorded
    /// yet. The market excuses a missed epoch whose round was recorded too late to prove (docs/CONTRACTS.md §5).
    function recordedAt(uint64 round) external view returns (uint64);
}
