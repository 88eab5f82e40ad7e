// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {DigestRegistry} from "./DigestRegistry.sol";
import {Digest} from "../lib/DporTypes.sol";
import {DporDigest} from "../lib/DporDigest.sol";
import {DporResize} from "../lib/DporResize.sol";
import {DporSampling} from "../lib/DporSampling.sol";
import {DporFenwick} from "../lib/DporFenwick.sol";

/// @title DealResize
/// @notice Growing or shrinking a deal's N (paper App. A.3; docs/CONTRACTS.md §4.1): the
///         owner and the provider co-sign the first digest of the new size together with
///         the deal's new price per epoch and collateral; the market moves the escrow,
///         the collateral and the provider's capacity and posts the digest, atomically.
abstract contract DealResize is DigestRegistry {
    /// @notice Resizes deal `d.dealId` to N = `d.numBlocks` blocks, with `d` its first
    ///         digest of the new size (the node rebuilt C for the new N, H is empty), a
    ///         price of `pricePerEpoch` wei per epoch (whole deal) and a collateral of
    ///         `collateral` wei from now on. `d` becomes the posted digest exactly as
    ///         {postDigest} records it (history record with its N, {DigestPosted} with
    ///         its {digestHash}); it is in force for the epochs starting after this
    ///         block. An epoch already started stays bound to the previous digest and is
    ///         proven and disputed against that digest's N.
    ///         Token movements (pull payments for what goes out):
    ///         - escrow := pricePerEpoch × (epochs of the term not settled yet); the
    ///           difference is pulled from the owner (approve first) or credited to its
    ///           {owed};
    ///         - collateral := `collateral`; the difference is pulled from the provider
    ///           (approve first) or credited to its {owed}; each fault slashes
    ///           ⌈collateral / maxFailures⌉ from now on;
    ///         - the provider's used capacity moves by new N − old N.
    ///         Emits {DigestPosted}, then {DealResized}.
    /// @dev Anyone may relay; the two signatures are the parties' consent. Requires: the
    ///      deal is Active ({UnknownDeal}, {WrongDealState}); no exit requested
    ///      ({ExitPending}: numEpochs < termEpochs); no open dispute ({DisputesOpen}: a
    ///      shrink must not release collateral a dispute could slash); `d.version` > the
    ///      posted version ({StaleVersion}: a used resize cannot be replayed);
    ///      `d.numBlocks` a power of two in 1..2^40 ({NumBlocksNotPowerOfTwo}) other than
    ///      the deal's N ({WrongNumBlocks}); `d.writeCount` < the new N ({WriteCountTooLarge})
    ///      and one level root per filled level ({LevelRootsMismatch}), as {postDigest}
    ///      requires (the node's first state of the new size has t = 0 and H empty, but
    ///      writes between the node's resize and this transaction are allowed: the
    ///      digest is whatever state both parties sign); the owner's and the provider's signatures over
    ///      {resizeHash}(d, pricePerEpoch, collateral) (ECDSA or ERC-1271;
    ///      {BadOwnerSignature}, {BadProviderSignature}); a grow within the provider's
    ///      capacity ({CapacityExceeded}; a shrink is always allowed); the new escrow
    ///      below 2^128 ({InvalidParameter}). The unsettled epochs are escrow / old price
    ///      (escrow is always old price × unsettled epochs while no exit is pending); at
    ///      an old price of 0 they are counted from the epoch status bits (one storage
    ///      read per 128 epochs of the term). Pulls revert {UnsupportedToken} on a
    ///      fee-on-transfer token. Source: paper App. A.3.
    /// @param d The first digest of the new size (any state of the new size: t < N').
    /// @param pricePerEpoch The deal's new price per epoch, wei (for all N blocks).
    /// @param collateral The deal's new collateral, wei.
    /// @param ownerSig The owner's signature of {resizeHash}(d, pricePerEpoch, collateral).
    /// @param providerSig The provider's signature of the same hash.
    function resizeDeal(
        Digest calldata d,
        uint128 pricePerEpoch,
        uint128 collateral,
        bytes calldata ownerSig,
        bytes calldata providerSig
    ) external nonReentrant {
        Deal storage deal = _activeDeal(d.dealId);
        if (deal.numEpochs != deal.termEpochs) revert ExitPending();
        if (deal.openDisputes != 0) revert DisputesOpen();
        uint64 prev = deal.digestVersion;
        if (d.version <= prev) revert StaleVersion();
        uint64 oldN = deal.numBlocks;
        uint64 n = d.numBlocks;
        if (n == 0 || n > MAX_BLOCKS || n & (n - 1) != 0) revert NumBlocksNotPowerOfTwo();
        if (n == oldN) revert WrongNumBlocks();
        if (d.writeCount >= n) revert WriteCountTooLarge();
        if (d.levelRoots.length != DporSampling.popcount(d.writeCount)) revert LevelRootsMismatch();
        bytes32 sh = DporDigest.structHash(d);
        _checkSignatures(
            deal, _hashTypedDataV4(DporResize.structHashOf(sh, pricePerEpoch, collateral)), ownerSig, providerSig
        );
        _resizeCapacity(deal, oldN, n);
        deal.numBlocks = n;
        _recordDigest(deal, d, _hashTypedDataV4(sh), prev);
        _resizeFunds(d.dealId, deal, oldN, pricePerEpoch, collateral);
    }

    /// @notice The EIP-712 hash the owner and the provider sign for a resize (anyone):
    ///         _hashTypedDataV4(keccak256(abi.encode(RESIZE_TYPEHASH,
    ///         DporDigest.structHash(d), pricePerEpoch, collateral))), type
    ///         `Resize(Digest digest,uint128 pricePerEpoch,uint128 collateral)Digest(...)`
    ///         (lib/DporResize.sol), domain name "dpor", version "1".
    /// @param d The first digest of the new size.
    /// @param pricePerEpoch The new price per epoch, wei.
    /// @param collateral The new collateral, wei.
    function resizeHash(Digest calldata d, uint128 pricePerEpoch, uint128 collateral)
        external
        view
        returns (bytes32)
    {
        return _hashTypedDataV4(DporResize.structHash(d, pricePerEpoch, collateral));
    }

    /// @dev Moves the provider's used capacity from `oldN` to `n` blocks; a grow must fit
    ///      its capacity ({CapacityExceeded}), a shrink always passes. Moves the deal's
    ///      weight in the provider's Fenwick tree too (the safety draw, docs/COMMITMENTS.md
    ///      §5), the total at the start of the current global epoch recorded first.
    function _resizeCapacity(Deal storage deal, uint64 oldN, uint64 n) private {
        Provider storage p = _providers[deal.provider];
        uint64 before = p.usedBlocks;
        uint256 used = uint256(before) - oldN + n; // usedBlocks includes this deal's oldN
        if (n > oldN && used > p.capacityBlocks) revert CapacityExceeded();
        p.usedBlocks = uint64(used);
        ProviderBook storage b = _books[deal.provider];
        _noteListChange(b, before);
        unchecked {
            DporFenwick.add(b.tree, uint256(deal.listIndex) + 1, uint64(n - oldN), b.deals.length);
        }
    }

    /// @dev Sets the deal's price, escrow, collateral and slash per fault, emits
    ///      {DealResized}, then credits what goes out and pulls what comes in (the
    ///      owner's escrow difference, the provider's collateral difference).
    function _resizeFunds(uint256 dealId, Deal storage deal, uint64 oldN, uint128 price, uint128 collateral)
        private
    {
        uint256 oldEscrow = deal.escrow;
        uint256 oldCollateral = deal.collateral;
        uint256 escrow = uint256(price) * _unsettledEpochs(dealId, deal);
        if (escrow > type(uint128).max) revert InvalidParameter();
        deal.pricePerEpoch = price;
        deal.escrow = uint128(escrow);
        deal.collateral = collateral;
        deal.slashPerFault = uint128(Math.ceilDiv(collateral, maxFailures));
        emit DealResized(dealId, oldN, deal.numBlocks, price, uint128(escrow), collateral);
        // Credits (effects) before pulls (interactions).
        if (escrow < oldEscrow) _credit(deal.owner, oldEscrow - escrow);
        if (collateral < oldCollateral) _credit(deal.provider, oldCollateral - collateral);
        if (escrow > oldEscrow) _pullTokens(deal.owner, escrow - oldEscrow);
        if (collateral > oldCollateral) _pullTokens(deal.provider, collateral - oldCollateral);
    }

    /// @dev Epochs of the term not settled yet (none is dropped: no exit is pending). With
    ///      a non-zero price the escrow holds exactly price × that count (each settlement
    ///      takes one price out); with price 0 the status bits are counted.
    function _unsettledEpochs(uint256 dealId, Deal storage deal) private view returns (uint256) {
        uint256 price = deal.pricePerEpoch;
        if (price != 0) return deal.escrow / price;
        uint256 epochs = deal.numEpochs;
        uint256 settled;
        for (uint256 w; w << 7 < epochs; ++w) {
            uint256 x = _epochBits[dealId][w];
            x = (x | (x >> 1)) & 0x5555555555555555555555555555555555555555555555555555555555555555;
            for (uint256 k; k < 256; k += 64) settled += DporSampling.popcount(x >> k);
        }
        return epochs - settled;
    }
}
