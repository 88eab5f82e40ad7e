// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {TestToken} from "../src/token/TestToken.sol";
import {DporMarket} from "../src/DporMarket.sol";

interface VmScript {
    function envOr(string calldata, uint256) external view returns (uint256);
    function startBroadcast(uint256) external;
    function stopBroadcast() external;
    function toString(address) external pure returns (string memory);
    function toString(uint256) external pure returns (string memory);
}

/// @notice Deploys the test token and the market.
///
///   npx forge script contracts/script/Deploy.s.sol:Deploy --rpc-url http://127.0.0.1:8545 --broadcast
///
/// Environment (all optional): DEPLOYER_KEY (default: anvil account 0), EPOCH_BLOCKS (10),
/// DISPUTE_WINDOW (20), DISPUTE_BOND (100e18), CHALLENGER_SHARE_BPS (5000),
/// MAX_FAILURES (3), MIN_STAKE (1000e18).
/// Prints, under "== Logs ==", one `KEY=value` line each for DPOR_TOKEN, DPOR_MARKET,
/// DPOR_CHAIN_ID, DPOR_DEPLOY_BLOCK (shell: grep '^ *DPOR_' | tr -d ' ').
contract Deploy {
    VmScript internal constant vm = VmScript(address(uint160(uint256(keccak256("hevm cheat code")))));
    address internal constant CONSOLE = 0x000000000000000000636F6e736F6c652e6c6f67;
    uint256 internal constant ANVIL_KEY_0 = 0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80;

    function run() external returns (TestToken token, DporMarket market) {
        uint256 key = vm.envOr("DEPLOYER_KEY", ANVIL_KEY_0);
        vm.startBroadcast(key);
        token = new TestToken();
        market = new DporMarket(
            IERC20(address(token)),
            uint64(vm.envOr("EPOCH_BLOCKS", 10)),
            uint64(vm.envOr("DISPUTE_WINDOW", 20)),
            uint128(vm.envOr("DISPUTE_BOND", 100e18)),
            uint16(vm.envOr("CHALLENGER_SHARE_BPS", 5000)),
            uint16(vm.envOr("MAX_FAILURES", 3)),
            vm.envOr("MIN_STAKE", 1000e18)
        );
        vm.stopBroadcast();
        _log(string.concat("DPOR_TOKEN=", vm.toString(address(token))));
        _log(string.concat("DPOR_MARKET=", vm.toString(address(market))));
        _log(string.concat("DPOR_CHAIN_ID=", vm.toString(block.chainid)));
        _log(string.concat("DPOR_DEPLOY_BLOCK=", vm.toString(block.number)));
    }

    function _log(string memory s) internal view {
        (bool ok,) = CONSOLE.staticcall(abi.encodeWithSignature("log(string)", s));
        ok;
    }
}
