// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {CommitFixture} from "../utils/CommitFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest} from "../../src/lib/DporTypes.sol";

/// @notice Issue 22: a provider fills a lost deal's slot with a copy of another deal's
///         leaf (or repeats leaves to keep the leaf count right). A leaf names its deal
///         id, epoch and version, so a duplicate proves only the deal it was made for:
///         the lost deal's entry is still unanswerable. docs/COMMITMENTS.md §1.
contract F16_DuplicatedEntries is CommitFixture {
    function test_attack_duplicateAnotherDealsLeaf() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(3, 4, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _noDraw(g);
        bytes32[] memory l = _leaves(ids, ds, g);
        l[1] = l[0]; // ids[1] lost: its slot holds ids[0]'s entry
        _commit(g, l);
        // the duplicated entry answers for ids[0], at either index
        uint256 c0 = _challenge(ids[0], 0);
        _answer(c0, ds[0], l, 1);
        // but not for ids[1]
        uint256 c1 = _challenge(ids[1], 0);
        _noIndexWorks(c1, ds[1], l);
        _faultLater(c1);
        vm.assertEq(market.getDeal(ids[1]).failures, 1, "caught");
        vm.assertEq(market.getDeal(ids[0]).failures, 0);
    }
}
