// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {TestToken} from "../src/token/TestToken.sol";
import {DporMarket} from "../src/DporMarket.sol";
import {DporCommitmentsExt} from "../src/market/DporCommitmentsExt.sol";
import {IRandomnessBeacon} from "../src/market/IRandomnessBeacon.sol";
import {MarketParams} from "../src/lib/DporTypes.sol";
import {IDporMarketFull} from "../src/market/IDporMarket.sol";
import {FileManifest} from "../src/manifest/FileManifest.sol";

interface VmScript {
    function envOr(string calldata, uint256) external view returns (uint256);
    function envOr(string calldata, address) external view returns (address);
    function startBroadcast(uint256) external;
    function stopBroadcast() external;
    function toString(address) external pure returns (string memory);
    function toString(uint256) external pure returns (string memory);
}

/// @notice Deploys the test token, the market (which creates its verifier and extension),
///         the file manifest registry over that market, then the market's commitments
///         extension and installs it (after the manifest, so the token, market and
///         manifest keep their addresses: deployer nonces 0, 1 and 2; the extension is
///         nonce 3, the installation nonce 4).
///
///   npx forge script contracts/script/Deploy.s.sol:Deploy --rpc-url http://127.0.0.1:8545 --broadcast
///
/// Environment (all optional): DEPLOYER_KEY (default: anvil account 0), BEACON (address
/// of an IRandomnessBeacon; default 0 = dev mode, blockhash seeds, local only),
/// EPOCH_SECONDS (86400), ANSWER_SECONDS (86400), GRACE_SECONDS (172800),
/// UPLOAD_SECONDS (86400), EXIT_NOTICE_EPOCHS (7), DISPUTE_BOND (100e18),
/// CHALLENGER_SHARE_BPS (5000), MAX_FAILURES (3), MIN_STAKE (1000e18). Durations below
/// the market's floors (docs/CONTRACTS.md §1) make the deployment revert: local demos
/// warp time instead.
/// Prints, under "== Logs ==", one `KEY=value` line each for DPOR_TOKEN, DPOR_MARKET,
/// DPOR_CHAIN_ID, DPOR_DEPLOY_BLOCK, DPOR_VERIFIER, DPOR_EXTENSION, DPOR_BEACON,
/// DPOR_GENESIS (epoch grid origin, a timestamp), DPOR_EPOCH_SECONDS, DPOR_MANIFEST,
/// DPOR_COMMITMENTS (shell: grep '^ *DPOR_' | tr -d ' ').
contract Deploy {
    VmScript internal constant vm = VmScript(address(uint160(uint256(keccak256("hevm cheat code")))));
    address internal constant CONSOLE = 0x000000000000000000636F6e736F6c652e6c6f67;
    uint256 internal constant ANVIL_KEY_0 = 0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80;

    function run() external returns (TestToken token, DporMarket market, FileManifest manifest) {
        uint256 key = vm.envOr("DEPLOYER_KEY", ANVIL_KEY_0);
        address beacon = vm.envOr("BEACON", address(0));
        MarketParams memory p = params();
        vm.startBroadcast(key);
        token = new TestToken();
        market = new DporMarket(IERC20(address(token)), IRandomnessBeacon(beacon), p);
        manifest = new FileManifest(IDporMarketFull(address(market)));
        DporCommitmentsExt commitments = new DporCommitmentsExt(IDporMarketFull(address(market)));
        IDporMarketFull(address(market)).installCommitments(address(commitments));
        vm.stopBroadcast();
        _log(string.concat("DPOR_TOKEN=", vm.toString(address(token))));
        _log(string.concat("DPOR_MARKET=", vm.toString(address(market))));
        _log(string.concat("DPOR_CHAIN_ID=", vm.toString(block.chainid)));
        _log(string.concat("DPOR_DEPLOY_BLOCK=", vm.toString(block.number)));
        _log(string.concat("DPOR_VERIFIER=", vm.toString(address(market.verifier()))));
        _log(string.concat("DPOR_EXTENSION=", vm.toString(address(market.extension()))));
        _log(string.concat("DPOR_BEACON=", vm.toString(beacon)));
        _log(string.concat("DPOR_GENESIS=", vm.toString(uint256(market.genesis()))));
        _log(string.concat("DPOR_EPOCH_SECONDS=", vm.toString(uint256(market.epochSeconds()))));
        _log(string.concat("DPOR_MANIFEST=", vm.toString(address(manifest))));
        _log(string.concat("DPOR_COMMITMENTS=", vm.toString(address(commitments))));
    }

    /// @notice The market parameters from the environment (defaults in the contract doc).
    function params() public view returns (MarketParams memory p) {
        p.epochSeconds = uint64(vm.envOr("EPOCH_SECONDS", 86400));
        p.answerSeconds = uint64(vm.envOr("ANSWER_SECONDS", 86400));
        p.graceSeconds = uint64(vm.envOr("GRACE_SECONDS", 172800));
        p.uploadSeconds = uint64(vm.envOr("UPLOAD_SECONDS", 86400));
        p.exitNoticeEpochs = uint32(vm.envOr("EXIT_NOTICE_EPOCHS", 7));
        p.disputeBond = uint128(vm.envOr("DISPUTE_BOND", 100e18));
        p.challengerShareBps = uint16(vm.envOr("CHALLENGER_SHARE_BPS", 5000));
        p.maxFailures = uint16(vm.envOr("MAX_FAILURES", 3));
        p.minStake = vm.envOr("MIN_STAKE", 1000e18);
    }

    function _log(string memory s) internal view {
        (bool ok,) = CONSOLE.staticcall(abi.encodeWithSignature("log(string)", s));
        ok;
    }
}
