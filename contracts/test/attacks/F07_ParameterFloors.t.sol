// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "../utils/MarketFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {DporMarket} from "../../src/DporMarket.sol";
import {IRandomnessBeacon} from "../../src/market/IRandomnessBeacon.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Digest, SampleProof, MarketParams} from "../../src/lib/DporTypes.sol";

/// @notice Finding 7 (medium): parameters with no floor. 10-block epochs and a 20-block
///         dispute window let three disputes during an outage or a gas spike end a deal.
///         Now the constructor enforces floors (6 h epochs, 15 h answer window, 1 day
///         grace and upload, maxFailures ≥ 3).
contract F07_ParameterFloors is MarketFixture {
    function test_attack_tinyParametersRejected() public {
        // the old defaults: 10 blocks ≈ 120 s epochs, 20 blocks ≈ 240 s to answer
        MarketParams memory p = MarketParams(120, 240, 240, 240, 1, BOND, SHARE_BPS, 3, MIN_STAKE);
        vm.expectRevert(IDporMarket.BelowFloor.selector);
        new DporMarket(IERC20(address(token)), IRandomnessBeacon(address(beacon)), p);
    }

    /// Three disputes during a 14-hour outage (below the 15 h floor): the provider answers
    /// all of them when it is back and loses nothing.
    function test_attack_threeDisputesDuringAnOutage() public {
        uint256 id = _openAccepted(4, BETA, 1, 10);
        Digest memory d = _postReal(id, 1, 3);
        uint256[3] memory qs;
        for (uint256 i; i < 3; ++i) {
            vm.prank(owner);
            qs[i] = market.openDispute(id, 0, 1, bytes32("outage"), 0, uint64(i), 0);
            vm.warp(block.timestamp + 10 minutes);
        }
        vm.warp(block.timestamp + 14 hours - 30 minutes);
        for (uint256 i; i < 3; ++i) {
            vm.expectRevert(IDporMarket.DeadlineNotPassed.selector);
            market.slash(qs[i]);
            market.answerDispute(qs[i], d, buildProof(0, i, 0, 4, BETA));
        }
        vm.assertEq(market.getDeal(id).failures, 0);
        vm.assertEq(market.getDeal(id).collateral, 4 * COLLATERAL);
    }
}
