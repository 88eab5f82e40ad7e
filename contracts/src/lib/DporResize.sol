// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Digest} from "./DporTypes.sol";
import {DporDigest} from "./DporDigest.sol";

/// @title DporResize
/// @notice EIP-712 struct hash of a deal resize (paper App. A.3; docs/CONTRACTS.md §4.1):
///         the first digest of the new size together with the deal's new price and
///         collateral, which the owner and the provider both sign. Same domain as
///         digests (name "dpor", version "1", the market).
library DporResize {
    /// @notice The EIP-712 type hash of `Resize` (its referenced type `Digest` appended,
    ///         as EIP-712 encodeType requires).
    bytes32 internal constant RESIZE_TYPEHASH = keccak256(
        "Resize(Digest digest,uint128 pricePerEpoch,uint128 collateral)Digest(uint256 dealId,uint64 version,uint64 numBlocks,uint64 writeCount,uint64 rebuildCount,bytes32 rootU,bytes32 rootC,bytes32[] levelRoots)"
    );

    /// @notice hashStruct(Resize(d, pricePerEpoch, collateral)) =
    ///         keccak256(abi.encode(RESIZE_TYPEHASH, DporDigest.structHash(d), pricePerEpoch, collateral)).
    /// @param d The first digest of the new size (calldata).
    /// @param pricePerEpoch The deal's new price per epoch (wei of the market's token, whole deal).
    /// @param collateral The deal's new collateral (wei).
    function structHash(Digest calldata d, uint128 pricePerEpoch, uint128 collateral)
        internal
        pure
        returns (bytes32)
    {
        return structHashOf(DporDigest.structHash(d), pricePerEpoch, collateral);
    }

    /// @notice The same from the digest's struct hash `digestStructHash` (DporDigest.structHash).
    function structHashOf(bytes32 digestStructHash, uint128 pricePerEpoch, uint128 collateral)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(RESIZE_TYPEHASH, digestStructHash, pricePerEpoch, collateral));
    }
}
