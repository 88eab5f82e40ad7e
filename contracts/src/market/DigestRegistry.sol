// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";
import {DealManager} from "./DealManager.sol";
import {Digest, DigestRecord, StoredDigest} from "../lib/DporTypes.sol";
import {DporDigest} from "../lib/DporDigest.sol";
import {DporSampling} from "../lib/DporSampling.sol";

/// @title DigestRegistry
/// @notice Dual-signed EIP-712 digests (docs/ENCODING.md §5) and their history: per
///         deal and version the hash, the time it was posted, its write count and the
///         neighbouring versions, so each epoch is bound to the digest in force at its
///         start (docs/CONTRACTS.md §4).
abstract contract DigestRegistry is DealManager {
    /// @notice Posts a digest signed by both the deal's owner and its provider. It is in
    ///         force for every epoch that starts after this block's timestamp (until a
    ///         later digest is), never for an epoch already started.
    /// @dev Anyone may relay. Requires: the deal is Active, `d.version` > the posted
    ///      version, `d.numBlocks` == the deal's N, `d.writeCount` < N,
    ///      `d.levelRoots.length` == popcount(writeCount), and valid signatures of the
    ///      owner and the provider over {digestHash}(d): 65-byte ECDSA for an EOA, or
    ///      ERC-1271 `isValidSignature` for a contract account (OpenZeppelin
    ///      SignatureChecker). Emits the whole preimage in {DigestPosted}.
    function postDigest(Digest calldata d, bytes calldata ownerSig, bytes calldata providerSig) external {
        Deal storage deal = _activeDeal(d.dealId);
        uint64 prev = deal.digestVersion;
        if (d.version <= prev) revert StaleVersion();
        if (d.numBlocks != deal.numBlocks) revert WrongNumBlocks();
        if (d.writeCount >= d.numBlocks) revert WriteCountTooLarge();
        if (d.levelRoots.length != DporSampling.popcount(d.writeCount)) revert LevelRootsMismatch();
        bytes32 h = _hashTypedDataV4(DporDigest.structHash(d));
        _checkSignatures(deal, h, ownerSig, providerSig);
        _recordDigest(deal, d, h, prev);
    }

    /// @notice The EIP-712 hash both parties sign for digest `d` (anyone).
    function digestHash(Digest calldata d) external view returns (bytes32) {
        return _hashTypedDataV4(DporDigest.structHash(d));
    }

    /// @notice The EIP-712 domain separator (name "dpor", version "1", this chain, this contract).
    function domainSeparator() external view returns (bytes32) {
        return _domainSeparatorV4();
    }

    /// @notice What the market kept of digest `version` of deal `dealId` (all zero if
    ///         never posted), with the digest's own N (`numBlocks`, blocks).
    function getDigestRecord(uint256 dealId, uint64 version) external view returns (DigestRecord memory r) {
        StoredDigest storage s = _digests[dealId][version];
        if (s.postedAt == 0) return r;
        r = DigestRecord(
            s.digestHash, s.postedAt, s.writeCount, s.nextVersion, s.prevVersion, uint64(1) << s.log2NumBlocks
        );
    }

    /// @dev Reverts {BadOwnerSignature} / {BadProviderSignature} unless `ownerSig` and
    ///      `providerSig` are the deal's owner's and provider's signatures of `h`
    ///      (ECDSA for an EOA, ERC-1271 for a contract account).
    function _checkSignatures(Deal storage deal, bytes32 h, bytes calldata ownerSig, bytes calldata providerSig)
        internal
        view
    {
        if (!SignatureChecker.isValidSignatureNow(deal.owner, h, ownerSig)) revert BadOwnerSignature();
        if (!SignatureChecker.isValidSignatureNow(deal.provider, h, providerSig)) revert BadProviderSignature();
    }

    /// @dev Makes `d` (hash `h`, checked by the caller: version > `prev` = the posted
    ///      version, a power-of-two N, t < N) the deal's posted digest: the deal's
    ///      version, t and hash, the first digest's time, the history record (with N as
    ///      log2) and the link from the previous version; emits {DigestPosted}.
    function _recordDigest(Deal storage deal, Digest calldata d, bytes32 h, uint64 prev) internal {
        deal.digestVersion = d.version;
        deal.writeCount = d.writeCount;
        deal.digestHash = h;
        if (deal.firstDigestAt == 0) deal.firstDigestAt = uint64(block.timestamp);
        _digests[d.dealId][d.version] = StoredDigest(
            h,
            uint64(block.timestamp),
            uint56(d.writeCount), // t < N ≤ 2^40
            uint8(Math.log2(d.numBlocks)), // exact: N is a power of two
            0,
            prev
        );
        if (prev != 0) _digests[d.dealId][prev].nextVersion = d.version;
        emit DigestPosted(d.dealId, d.version, h, d);
    }
}
