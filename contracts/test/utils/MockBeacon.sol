// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IRandomnessBeacon} from "../../src/market/IRandomnessBeacon.sol";

/// @notice A drand-like beacon for tests: round r is emitted at genesis + (r−1)·period
///         and its randomness is keccak256("mock", r, salt) once emitted, unless the round
///         was withheld ({withhold}: models a beacon nobody has relayed yet). A round counts
///         as recorded at its emission time, or, if it was withheld, when it was released.
contract MockBeacon is IRandomnessBeacon {
    uint256 public immutable genesisTime;
    uint256 public immutable period;
    bytes32 public salt;
    mapping(uint64 => bool) public withheld;
    /// @notice When a withheld round was released (0: never withheld, or still withheld).
    mapping(uint64 => uint64) public releasedAt;

    constructor(uint256 genesis_, uint256 period_) {
        genesisTime = genesis_;
        period = period_;
    }

    /// @notice Withholds (or releases, "relaying" it now) a round.
    function withhold(uint64 round, bool w) external {
        withheld[round] = w;
        releasedAt[round] = w ? 0 : uint64(block.timestamp);
    }

    /// @notice Changes every future answer (tests that a stored seed never changes).
    function setSalt(bytes32 s) external {
        salt = s;
    }

    function randomness(uint64 round) external view returns (bytes32) {
        if (round == 0 || withheld[round]) return bytes32(0);
        if (_emission(round) > block.timestamp) return bytes32(0);
        return keccak256(abi.encode("mock", round, salt));
    }

    function roundAt(uint256 timestamp) external view returns (uint64) {
        if (timestamp <= genesisTime) return 1;
        return uint64((timestamp - genesisTime + period - 1) / period + 1);
    }

    /// @notice The emission time, or the release time of a round that was withheld (the later).
    function recordedAt(uint64 round) external view returns (uint64) {
        if (round == 0 || withheld[round]) return 0;
        uint256 t = _emission(round);
        if (t > block.timestamp) return 0;
        uint256 r = releasedAt[round];
        return uint64(r > t ? r : t);
    }

    function _emission(uint64 round) internal view returns (uint256) {
        return genesisTime + (uint256(round) - 1) * period;
    }
}
