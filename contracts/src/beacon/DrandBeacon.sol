// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BN254} from "./BN254.sol";
import {IRandomnessBeacon} from "../market/IRandomnessBeacon.sol";

/// @title DrandBeacon: drand rounds verified on chain, one randomness per round, stored once
/// @notice Records the randomness of rounds of a drand beacon with the `bls-bn254-unchained-on-g1` scheme (drand's
///         `evmnet`: BLS on BN254, signatures in G1, group key in G2, one round every `period` seconds from
///         `genesisTime`). Anyone may relay a round: `record(round, sig)` checks the BLS signature of
///         `keccak256(uint64 round, big-endian)` under the beacon's key with the BN254 precompiles and stores
///         drand's randomness `sha256(sig)`. BLS signatures are unique and the encoding is canonical, so the stored
///         value is the only one possible for that round: who relays first cannot change it, only make it
///         available. Deployed with a local key (`dpor-beacon keygen`), the same code runs the offline demo.
///         Implements the market's `IRandomnessBeacon` (randomness, roundAt, recordedAt: the block time of a
///         round's first relay, which the market uses to excuse epochs whose round came too late). docs/BEACON.md.
/// @dev Gas of `record` (test_gas_record in contracts/test/beacon/DrandBeacon.t.sol; docs/BEACON.md): 183k-195k
///      execution (prague), of which the 2-pair pairing is 113k, hashing to G1 about 18k (34k under Osaka's modexp
///      pricing, EIP-7883) and the two storage writes (randomness, recordedAt) 44k.
contract DrandBeacon is IRandomnessBeacon {
    /// @notice The hash-to-curve domain separation tag of drand's `bls-bn254-unchained-on-g1` scheme.
    bytes public constant DST = "BLS_SIG_BN254G1_XMD:KECCAK-256_SVDW_RO_NUL_";

    /// @notice The beacon's group public key, EIP-197 word order (x.c1, x.c0, y.c1, y.c0) = drand's `public_key`
    ///         hex split into four 32-byte words.
    uint256 internal immutable PK0;
    uint256 internal immutable PK1;
    uint256 internal immutable PK2;
    uint256 internal immutable PK3;
    /// @notice UNIX time of round 1.
    uint64 public immutable genesisTime;
    /// @notice Seconds between rounds.
    uint64 public immutable period;

    mapping(uint64 round => bytes32) internal _randomness;
    /// @dev block.timestamp of each round's first (and only) recording.
    mapping(uint64 round => uint64) internal _recordedAt;

    /// @notice A round's randomness was verified and stored.
    /// @param round The drand round.
    /// @param randomness sha256 of the signature (drand's `randomness` field).
    /// @param relayer Who submitted it (no reward; for monitoring).
    event RoundRecorded(uint64 indexed round, bytes32 randomness, address indexed relayer);

    /// @notice The constructor's key is not a canonical G2 point of the prime-order subgroup.
    error InvalidPublicKey();
    /// @notice Genesis time or period is zero.
    error InvalidSchedule();
    /// @notice drand has no signed round 0.
    error RoundZero();
    /// @notice The round's emission time `genesisTime + (round-1) * period` is after this block's timestamp.
    error RoundNotYetEmitted(uint64 round, uint256 emissionTime);
    /// @notice The round is already recorded (its value cannot change).
    error AlreadyRecorded(uint64 round);
    /// @notice The signature is not 64 bytes.
    error InvalidSignatureLength(uint256 length);
    /// @notice The signature is not a canonical G1 point other than the identity.
    error InvalidSignaturePoint();
    /// @notice The pairing check failed: not this beacon's signature of this round.
    error InvalidSignature(uint64 round);
    /// @notice roundAt would exceed uint64.
    error RoundOverflow();

    /// @param publicKey_ The beacon's group key, (x.c1, x.c0, y.c1, y.c0): for evmnet, drand's `public_key` hex in
    ///        four words (`dpor-beacon` prints them for a local key). Checked on the twist and in the subgroup.
    /// @param genesisTime_ UNIX time of round 1 (evmnet: 1727521075).
    /// @param period_ Seconds between rounds (evmnet: 3).
    constructor(uint256[4] memory publicKey_, uint64 genesisTime_, uint64 period_) {
        if (!BN254.isOnTwist(publicKey_) || !BN254.isInG2Subgroup(publicKey_)) revert InvalidPublicKey();
        if (genesisTime_ == 0 || period_ == 0) revert InvalidSchedule();
        (PK0, PK1, PK2, PK3) = (publicKey_[0], publicKey_[1], publicKey_[2], publicKey_[3]);
        genesisTime = genesisTime_;
        period = period_;
    }

    // ------------------------------------------------------------------ IRandomnessBeacon

    /// @notice Randomness of `round`, bytes32(0) if not recorded yet.
    function randomness(uint64 round) external view returns (bytes32) {
        return _randomness[round];
    }

    /// @notice When `round` was recorded: the block.timestamp of its first relay, which no later call can change
    ///         (`record` refuses a recorded round); 0 if not recorded yet.
    function recordedAt(uint64 round) external view returns (uint64) {
        return _recordedAt[round];
    }

    /// @notice The first round whose emission time is >= `timestamp` (round r is emitted at
    ///         genesis + (r-1)*period); 1 for any timestamp up to the genesis. Reverts `RoundOverflow` past uint64.
    function roundAt(uint256 timestamp) external view returns (uint64) {
        if (timestamp <= genesisTime) return 1;
        uint256 d = timestamp - genesisTime;
        uint256 r = d / period + (d % period == 0 ? 0 : 1) + 1;
        if (r > type(uint64).max) revert RoundOverflow();
        return uint64(r);
    }

    // ------------------------------------------------------------------ recording

    /// @notice Verifies `sig` as the beacon's signature of `round` and stores the round's randomness
    ///         `sha256(sig)` once. Anyone may call.
    /// @param round The drand round (>= 1, emitted at or before this block's timestamp, not yet recorded).
    /// @param sig The signature as drand serves it: 64 bytes, x || y big-endian, each < p.
    /// @return value The stored randomness.
    function record(uint64 round, bytes calldata sig) external returns (bytes32 value) {
        if (round == 0) revert RoundZero();
        if (_randomness[round] != bytes32(0)) revert AlreadyRecorded(round);
        uint256 t = roundTime(round);
        if (t > block.timestamp) revert RoundNotYetEmitted(round, t);
        if (sig.length != 64) revert InvalidSignatureLength(sig.length);
        uint256 sx = uint256(bytes32(sig[0:32]));
        uint256 sy = uint256(bytes32(sig[32:64]));
        if (!BN254.isValidG1(sx, sy)) revert InvalidSignaturePoint();
        (uint256 hx, uint256 hy) = roundPoint(round);
        if (!BN254.pairingCheck(sx, sy, hx, hy, publicKey())) revert InvalidSignature(round);
        value = sha256(sig);
        _randomness[round] = value;
        _recordedAt[round] = uint64(block.timestamp);
        emit RoundRecorded(round, value, msg.sender);
    }

    // ------------------------------------------------------------------ views

    /// @notice True iff `sig` is a well-formed signature of `round` under the beacon's key (no time or storage
    ///         checks). For off-chain tooling and tests; `record` is the state-changing path.
    function verify(uint64 round, bytes calldata sig) external view returns (bool) {
        if (round == 0 || sig.length != 64) return false;
        uint256 sx = uint256(bytes32(sig[0:32]));
        uint256 sy = uint256(bytes32(sig[32:64]));
        if (!BN254.isValidG1(sx, sy)) return false;
        (uint256 hx, uint256 hy) = roundPoint(round);
        return BN254.pairingCheck(sx, sy, hx, hy, publicKey());
    }

    /// @notice Emission time of `round`: genesisTime + (round - 1) * period (the genesis time for round 0).
    function roundTime(uint64 round) public view returns (uint256) {
        return round == 0 ? genesisTime : uint256(genesisTime) + uint256(round - 1) * period;
    }

    /// @notice The signed message of `round`: keccak256 of its 8-byte big-endian encoding.
    function roundMessage(uint64 round) public pure returns (bytes32) {
        return keccak256(abi.encodePacked(round));
    }

    /// @notice The G1 point the signature of `round` is a multiple of: hash_to_curve(roundMessage(round), DST).
    function roundPoint(uint64 round) public view returns (uint256 x, uint256 y) {
        return BN254.hashToG1(DST, abi.encodePacked(roundMessage(round)));
    }

    /// @notice The group public key (x.c1, x.c0, y.c1, y.c0).
    function publicKey() public view returns (uint256[4] memory) {
        return [PK0, PK1, PK2, PK3];
    }
}
