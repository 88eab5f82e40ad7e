// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "../utils/MarketFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {DporMarket} from "../../src/DporMarket.sol";
import {IRandomnessBeacon} from "../../src/market/IRandomnessBeacon.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice Second review: seeds in the local-development mode (no beacon: blockhash
///         seeds) are grindable by a block builder, and nothing stopped a deployment on
///         a public chain from enabling that mode. Now the constructor refuses it on any
///         chain but a local one (chain id 31337, anvil's and Hardhat's, or 1337,
///         Ganache's): {DevSeedsNotLocal}.
contract F13_DevSeedsOnPublicChain is MarketFixture {
    function test_attack_devSeedsRefusedOnPublicChains() public {
        uint256[4] memory publicChains = [uint256(1), 10, 8453, 11155111]; // mainnet, OP, Base, Sepolia
        for (uint256 i; i < publicChains.length; ++i) {
            vm.chainId(publicChains[i]);
            vm.expectRevert(IDporMarket.DevSeedsNotLocal.selector);
            new DporMarket(IERC20(address(token)), IRandomnessBeacon(address(0)), _params());
        }
    }

    /// A beacon deploys anywhere; the development mode on a local chain.
    function test_beaconAnywhereDevSeedsLocally() public {
        vm.chainId(1);
        DporMarket m = new DporMarket(IERC20(address(token)), IRandomnessBeacon(address(beacon)), _params());
        vm.assertFalse(m.devSeeds());
        uint256[2] memory local = [uint256(31337), 1337];
        for (uint256 i; i < local.length; ++i) {
            vm.chainId(local[i]);
            m = new DporMarket(IERC20(address(token)), IRandomnessBeacon(address(0)), _params());
            vm.assertTrue(m.devSeeds());
        }
    }
}
