// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {CommitFixture} from "../utils/CommitFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest} from "../../src/lib/DporTypes.sol";
import {DporMerkle} from "../../src/lib/DporMerkle.sol";

/// @notice Issue 22: someone other than the provider commits for its epoch: to cover a
///         provider that is down (so its epochs cannot be marked missed), or to block
///         the provider's own commitment with a garbage root. commitEpoch has no
///         provider argument: it commits for msg.sender only (registered providers), so
///         neither works. docs/COMMITMENTS.md §2.
contract F20_CommitForAnother is CommitFixture {
    function test_attack_strangerCommits() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(2, 4, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _noDraw(g);
        bytes32 root = DporMerkle.rootOfLeaves(_leaves(ids, ds, g));
        vm.prank(stranger);
        vm.expectRevert(IDporMarket.NotRegistered.selector);
        market.commitEpoch(g, root, 2);
        // a registered accomplice commits: only its own book changes
        vm.prank(stranger);
        market.register(hex"0024080113", _addrs(), PRICE, COLLATERAL, CAPACITY, MIN_STAKE);
        vm.prank(stranger);
        market.commitEpoch(g, root, 2);
        (, bool committed) = market.getCommitment(provider, g);
        vm.assertFalse(committed, "the provider's epoch is not covered");
        vm.expectRevert(IDporMarket.NotCommitted.selector);
        _challenge(ids[0], 0);
        _pastEpoch(ids[0], 0);
        market.markMissed(ids[0], 0);
        vm.assertEq(market.getDeal(ids[0]).failures, 1);
    }

    function test_attack_garbageRootDoesNotBlockTheProvider() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(2, 4, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _noDraw(g);
        vm.prank(stranger);
        market.register(hex"0024080113", _addrs(), PRICE, COLLATERAL, CAPACITY, MIN_STAKE);
        vm.prank(stranger);
        market.commitEpoch(g, keccak256("garbage"), 2);
        bytes32[] memory l = _leaves(ids, ds, g);
        _commit(g, l); // not blocked
        uint256 cid = _challenge(ids[1], 0);
        _answer(cid, ds[1], l, 1);
        vm.assertEq(market.getDeal(ids[1]).failures, 0);
    }
}
