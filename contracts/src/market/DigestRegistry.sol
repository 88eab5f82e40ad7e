// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {DealManager} from "./DealManager.sol";
import {Digest} from "../lib/DporTypes.sol";
import {DporDigest} from "../lib/DporDigest.sol";
import {DporSampling} from "../lib/DporSampling.sol";

/// @title DigestRegistry
/// @notice Dual-signed EIP-712 digests (docs/ENCODING.md §5). Stores only the latest
///         digest hash, version and write count of each deal.
abstract contract DigestRegistry is DealManager, EIP712 {
    /// @notice Posts a digest signed by both the deal's owner and its provider.
    /// @dev Anyone may relay. Requires: the deal is Active, `d.version` > the posted
    ///      version, `d.numBlocks` == the deal's N, `d.writeCount` < N,
    ///      `d.levelRoots.length` == popcount(writeCount), and both 65-byte signatures
    ///      over {digestHash}(d). Emits the whole preimage in {DigestPosted}.
    function postDigest(Digest calldata d, bytes calldata ownerSig, bytes calldata providerSig) external {
        Deal storage deal = _activeDeal(d.dealId);
        if (d.version <= deal.digestVersion) revert StaleVersion();
        if (d.numBlocks != deal.numBlocks) revert WrongNumBlocks();
        if (d.writeCount >= d.numBlocks) revert WriteCountTooLarge();
        if (d.levelRoots.length != DporSampling.popcount(d.writeCount)) revert LevelRootsMismatch();
        bytes32 h = _hashTypedDataV4(DporDigest.structHash(d));
        (address signer, ECDSA.RecoverError err,) = ECDSA.tryRecover(h, ownerSig);
        if (err != ECDSA.RecoverError.NoError || signer != deal.owner) revert BadOwnerSignature();
        (signer, err,) = ECDSA.tryRecover(h, providerSig);
        if (err != ECDSA.RecoverError.NoError || signer != deal.provider) revert BadProviderSignature();
        deal.digestVersion = d.version;
        deal.writeCount = d.writeCount;
        deal.digestHash = h;
        emit DigestPosted(d.dealId, d.version, h, d);
    }

    /// @notice The EIP-712 hash both parties sign for digest `d` (anyone).
    function digestHash(Digest calldata d) external view returns (bytes32) {
        return _hashTypedDataV4(DporDigest.structHash(d));
    }

    /// @notice The EIP-712 domain separator (name "dpor", version "1", this chain, this contract).
    function domainSeparator() external view returns (bytes32) {
        return _domainSeparatorV4();
    }

    /// @dev Hash of a digest preimage, checked against a stored hash.
    function _digestHashOf(Digest calldata d) internal view returns (bytes32) {
        return _hashTypedDataV4(DporDigest.structHash(d));
    }
}
