// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "../utils/MarketFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";

/// @notice Finding 8 (low): collateral front-run. Collateral came from the provider's
///         current rate, which it could set to 0 just before openDeal. Now the owner
///         names the minimum collateral per block it accepts (and the price it offers).
contract F08_CollateralFrontRun is MarketFixture {
    function test_attack_rateDroppedBeforeOpenDeal() public {
        // the provider front-runs the owner's openDeal
        vm.prank(provider);
        market.updateProvider(hex"0024080112", _addrs(), PRICE, 0, CAPACITY);
        vm.prank(owner);
        vm.expectRevert(IDporMarket.CollateralBelowMin.selector);
        market.openDeal(provider, 4, BETA, 16, 1, 5, PRICE, COLLATERAL);
        // raising the price above the offer is refused too
        vm.prank(provider);
        market.updateProvider(hex"0024080112", _addrs(), PRICE + 1, COLLATERAL, CAPACITY);
        vm.prank(owner);
        vm.expectRevert(IDporMarket.PriceBelowAsk.selector);
        market.openDeal(provider, 4, BETA, 16, 1, 5, PRICE, COLLATERAL);
        // a higher collateral than asked is fine: the deal locks the provider's rate
        vm.prank(provider);
        market.updateProvider(hex"0024080112", _addrs(), PRICE, 2 * COLLATERAL, CAPACITY);
        vm.prank(owner);
        uint256 id = market.openDeal(provider, 4, BETA, 16, 1, 5, PRICE, COLLATERAL);
        vm.assertEq(market.getDeal(id).collateral, 8 * COLLATERAL);
    }
}
