// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {CommitFixture} from "../utils/CommitFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest} from "../../src/lib/DporTypes.sol";

/// @notice Issue 22: a provider that lost one deal leaves its entry out of the epoch
///         commitment (a tree over its other deals only). Anyone who challenges the
///         missing entry wins: no leaf path leads from the deal's response to the root,
///         so the challenge is faulted and the provider slashed one fault, as if it had
///         missed the epoch. docs/COMMITMENTS.md §3.
contract F14_OmittedEntry is CommitFixture {
    function test_attack_omitOneDeal() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(3, 4, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _noDraw(g);
        bytes32[] memory all = _leaves(ids, ds, g);
        bytes32[] memory partial_ = new bytes32[](2);
        partial_[0] = all[0];
        partial_[1] = all[2]; // ids[1] left out
        _commit(g, partial_);
        uint256 cid = _challenge(ids[1], 0);
        // even with the deal's real blocks, no index of the committed tree works
        _noIndexWorks(cid, ds[1], partial_);
        _answerReverts(cid, ds[1], all, 1, IDporMarket.NotInCommitment.selector);
        uint256 slash = _slash(ids[1]);
        _faultLater(cid);
        IDporMarket.Deal memory deal = market.getDeal(ids[1]);
        vm.assertEq(deal.failures, 1, "caught");
        vm.assertEq(market.owed(challenger), slash * SHARE_BPS / 10_000 + BOND);
        vm.assertEq(uint256(market.epochStatus(ids[1], 0)), uint256(IDporMarket.EpochStatus.Missed));
    }
}
