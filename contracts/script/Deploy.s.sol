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

/// @notice The cheatcodes this script uses (forge's `Vm`, the subset we need).
interface VmScript {
    function envOr(string calldata, uint256) external view returns (uint256);
    function envOr(string calldata, address) external view returns (address);
    function envOr(string calldata, string calldata) external view returns (string memory);
    function envExists(string calldata) external view returns (bool);
    function envUint(string calldata) external view returns (uint256);
    function readFile(string calldata) external view returns (string memory);
    function writeFile(string calldata, string calldata) external;
    function keyExistsToml(string calldata, string calldata) external view returns (bool);
    function parseTomlUint(string calldata, string calldata) external pure returns (uint256);
    function parseTomlAddress(string calldata, string calldata) external pure returns (address);
    function parseTomlString(string calldata, string calldata) external pure returns (string memory);
    function parseTomlKeys(string calldata, string calldata) external pure returns (string[] memory);
    function startBroadcast(uint256) external;
    function stopBroadcast() external;
    function addr(uint256) external pure returns (address);
    function toString(address) external pure returns (string memory);
    function toString(uint256) external pure returns (string memory);
    function toString(bool) external pure returns (string memory);
}

/// @notice Deploys the market and what goes with it, on any EVM chain, with every
///         parameter taken from a TOML file and/or the environment (docs/OPERATIONS.md,
///         "Deploying the contracts", lists every key with its unit and default):
///
///   DPOR_DEPLOY_CONFIG=deploy/sepolia.toml DEPLOYER_KEY=0x… \
///     forge script contracts/script/Deploy.s.sol:Deploy --rpc-url $RPC --broadcast
///
///         In order: the ERC-20 (`TestToken`, only when no `token` is given), the market
///         (which creates its verifier and extension), the file manifest registry over
///         that market, then the market's commitments extension, installed last. With
///         the default key on a fresh anvil and no `token`, the deployer's nonces 0, 1,
///         2, 3 are the token, market, manifest and extension (the fixed local addresses
///         the CLI and node default to, docs/CONTRACTS.md §9); with a `token` given every
///         address moves down one nonce, and on any other chain it depends on the
///         deployer's history: read the addresses from the output, never predict them.
///
///         Sources: the file named by `DPOR_DEPLOY_CONFIG` (read with `vm.readFile`: its
///         path must be inside a folder `fs_permissions` allows, `deploy/` in this
///         repository's foundry.toml, or see docs/OPERATIONS.md for any other path), then
///         the environment, which OVERRIDES the file key by key (`EPOCH_SECONDS` over
///         `epoch_seconds`, …). The deployer's key is read from the environment only
///         (`DEPLOYER_KEY`; a key in a config file ends up in backups and commits).
///
///         Refusals (before any transaction): no beacon (development seeds from
///         blockhash, grindable) on a chain whose id is not a local one (31337, 1337);
///         no `DEPLOYER_KEY` on such a chain (the default is anvil's public key 0); a
///         `token` or `beacon` address without contract code.
///
///         Output: one `KEY=value` line each (under "== Logs ==": DPOR_TOKEN, DPOR_MARKET,
///         DPOR_CHAIN_ID, DPOR_DEPLOY_BLOCK, DPOR_VERIFIER, DPOR_EXTENSION, DPOR_BEACON,
///         DPOR_GENESIS, DPOR_EPOCH_SECONDS, DPOR_MANIFEST, DPOR_COMMITMENTS; shell:
///         grep '^ *DPOR_' | tr -d ' '), then the deployment as one JSON line
///         (`DPOR_DEPLOYMENT={…}`), also written to the file `out` / `DPOR_DEPLOY_OUT`
///         names, if any (inside `deployments/`, or see docs/OPERATIONS.md). forge writes
///         it while it runs the script, before it broadcasts: trust it only when forge
///         exits 0 (a dry run without --broadcast writes the addresses it would use).
contract Deploy {
    VmScript internal constant vm = VmScript(address(uint160(uint256(keccak256("hevm cheat code")))));
    address internal constant CONSOLE = 0x000000000000000000636F6e736F6c652e6c6f67;
    uint256 internal constant ANVIL_KEY_0 = 0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80;

    /// @notice Everything the deployment is made of, after the file and the environment.
    struct Config {
        /// The existing ERC-20 to use; 0 = deploy `TestToken` (anyone can mint it).
        address token;
        /// The randomness beacon (IRandomnessBeacon); 0 = development seeds (local chains only).
        address beacon;
        /// Where to write the deployment JSON ("" = nowhere).
        string out;
        /// The market's parameters.
        MarketParams params;
    }

    /// @notice The deployed addresses and what the node and the CLI need with them.
    struct Deployment {
        uint256 chainId;
        uint256 deployBlock;
        address deployer;
        address token;
        bool tokenDeployed;
        address beacon;
        address market;
        address verifier;
        address extension;
        address manifest;
        address commitments;
        uint256 genesis;
    }

    /// @notice Reads the configuration, refuses what must not be deployed, deploys, and
    ///         prints (and writes) the addresses.
    function run() external returns (address token, DporMarket market, FileManifest manifest) {
        Config memory c = config();
        uint256 key = deployerKey();
        refuse(c);
        Deployment memory d;
        d.chainId = block.chainid;
        d.deployBlock = block.number;
        d.deployer = vm.addr(key);
        d.beacon = c.beacon;
        vm.startBroadcast(key);
        token = c.token;
        if (token == address(0)) {
            token = address(new TestToken());
            d.tokenDeployed = true;
        }
        market = new DporMarket(IERC20(token), IRandomnessBeacon(c.beacon), c.params);
        manifest = new FileManifest(IDporMarketFull(address(market)));
        DporCommitmentsExt commitments = new DporCommitmentsExt(IDporMarketFull(address(market)));
        IDporMarketFull(address(market)).installCommitments(address(commitments));
        vm.stopBroadcast();
        d.token = token;
        d.market = address(market);
        d.verifier = address(market.verifier());
        d.extension = address(market.extension());
        d.manifest = address(manifest);
        d.commitments = address(commitments);
        d.genesis = uint256(market.genesis());
        _log(string.concat("DPOR_TOKEN=", vm.toString(d.token)));
        _log(string.concat("DPOR_MARKET=", vm.toString(d.market)));
        _log(string.concat("DPOR_CHAIN_ID=", vm.toString(d.chainId)));
        _log(string.concat("DPOR_DEPLOY_BLOCK=", vm.toString(d.deployBlock)));
        _log(string.concat("DPOR_VERIFIER=", vm.toString(d.verifier)));
        _log(string.concat("DPOR_EXTENSION=", vm.toString(d.extension)));
        _log(string.concat("DPOR_BEACON=", vm.toString(d.beacon)));
        _log(string.concat("DPOR_GENESIS=", vm.toString(d.genesis)));
        _log(string.concat("DPOR_EPOCH_SECONDS=", vm.toString(uint256(market.epochSeconds()))));
        _log(string.concat("DPOR_MANIFEST=", vm.toString(d.manifest)));
        _log(string.concat("DPOR_COMMITMENTS=", vm.toString(d.commitments)));
        string memory json = toJson(d, c.params);
        _log(string.concat("DPOR_DEPLOYMENT=", json));
        if (bytes(c.out).length != 0) {
            vm.writeFile(c.out, string.concat(json, "\n"));
        }
    }

    /// @notice The configuration: defaults, then the TOML file `DPOR_DEPLOY_CONFIG` (if
    ///         set), then the environment, each one overriding the one before.
    function config() public view returns (Config memory c) {
        string memory toml = "";
        string memory path = vm.envOr("DPOR_DEPLOY_CONFIG", string(""));
        if (bytes(path).length != 0) {
            toml = vm.readFile(path);
            _checkKeys(toml, path);
        }
        c.token = vm.envOr("TOKEN", _addr(toml, ".token"));
        c.beacon = vm.envOr("BEACON", _addr(toml, ".beacon"));
        c.out = vm.envOr("DPOR_DEPLOY_OUT", _str(toml, ".out"));
        MarketParams memory p = c.params;
        p.epochSeconds = uint64(_uint(toml, ".epoch_seconds", "EPOCH_SECONDS", 86400, type(uint64).max));
        p.answerSeconds = uint64(_uint(toml, ".answer_seconds", "ANSWER_SECONDS", 86400, type(uint64).max));
        p.graceSeconds = uint64(_uint(toml, ".grace_seconds", "GRACE_SECONDS", 172800, type(uint64).max));
        p.uploadSeconds = uint64(_uint(toml, ".upload_seconds", "UPLOAD_SECONDS", 86400, type(uint64).max));
        p.exitNoticeEpochs = uint32(_uint(toml, ".exit_notice_epochs", "EXIT_NOTICE_EPOCHS", 7, type(uint32).max));
        p.disputeBond = uint128(_uint(toml, ".dispute_bond", "DISPUTE_BOND", 100e18, type(uint128).max));
        p.challengerShareBps =
            uint16(_uint(toml, ".challenger_share_bps", "CHALLENGER_SHARE_BPS", 5000, type(uint16).max));
        p.maxFailures = uint16(_uint(toml, ".max_failures", "MAX_FAILURES", 3, type(uint16).max));
        p.minStake = _uint(toml, ".min_stake", "MIN_STAKE", 1000e18, type(uint256).max);
    }

    /// @notice The market parameters alone (as `config()` reads them).
    function params() public view returns (MarketParams memory) {
        return config().params;
    }

    /// @notice Whether `chainId` is a local development chain (anvil 31337, ganache/geth dev 1337).
    function isLocalChain(uint256 chainId) public pure returns (bool) {
        return chainId == 31337 || chainId == 1337;
    }

    /// @notice The deployer's key: `DEPLOYER_KEY`, or anvil's public account 0 on a local chain.
    function deployerKey() public view returns (uint256) {
        if (vm.envExists("DEPLOYER_KEY")) {
            return vm.envUint("DEPLOYER_KEY");
        }
        require(
            isLocalChain(block.chainid),
            string.concat(
                "Deploy: no DEPLOYER_KEY on chain id ",
                vm.toString(block.chainid),
                ": the default is anvil's public account 0 (local chains only); set DEPLOYER_KEY"
            )
        );
        return ANVIL_KEY_0;
    }

    /// @notice Reverts on a configuration that must not be deployed (see the contract doc).
    function refuse(Config memory c) public view {
        require(
            c.beacon != address(0) || isLocalChain(block.chainid),
            string.concat(
                "Deploy: refusing development seeds (no beacon: blockhash seeds, which block builders can grind) on chain id ",
                vm.toString(block.chainid),
                "; only local chains (31337, 1337) may run without one: set `beacon` (or BEACON) to a DrandBeacon"
            )
        );
        require(
            c.beacon == address(0) || c.beacon.code.length != 0,
            string.concat("Deploy: the beacon ", vm.toString(c.beacon), " has no contract code on this chain")
        );
        require(
            c.token == address(0) || c.token.code.length != 0,
            string.concat("Deploy: the token ", vm.toString(c.token), " has no contract code on this chain")
        );
    }

    /// @notice The deployment as one line of JSON (docs/OPERATIONS.md, "The deployment file").
    function toJson(Deployment memory d, MarketParams memory p) public pure returns (string memory) {
        string memory a = string.concat(
            "{\"chain_id\":",
            vm.toString(d.chainId),
            ",\"deploy_block\":",
            vm.toString(d.deployBlock),
            ",\"deployer\":\"",
            vm.toString(d.deployer),
            "\",\"token\":\"",
            vm.toString(d.token),
            "\",\"token_deployed\":",
            vm.toString(d.tokenDeployed),
            ",\"beacon\":\"",
            vm.toString(d.beacon),
            "\",\"dev_seeds\":",
            vm.toString(d.beacon == address(0))
        );
        string memory b = string.concat(
            ",\"market\":\"",
            vm.toString(d.market),
            "\",\"verifier\":\"",
            vm.toString(d.verifier),
            "\",\"extension\":\"",
            vm.toString(d.extension),
            "\",\"manifest\":\"",
            vm.toString(d.manifest),
            "\",\"commitments\":\"",
            vm.toString(d.commitments),
            "\""
        );
        string memory q = string.concat(
            ",\"params\":{\"epoch_seconds\":",
            vm.toString(uint256(p.epochSeconds)),
            ",\"answer_seconds\":",
            vm.toString(uint256(p.answerSeconds)),
            ",\"grace_seconds\":",
            vm.toString(uint256(p.graceSeconds)),
            ",\"upload_seconds\":",
            vm.toString(uint256(p.uploadSeconds)),
            ",\"exit_notice_epochs\":",
            vm.toString(uint256(p.exitNoticeEpochs))
        );
        string memory r = string.concat(
            ",\"dispute_bond\":\"",
            vm.toString(uint256(p.disputeBond)),
            "\",\"challenger_share_bps\":",
            vm.toString(uint256(p.challengerShareBps)),
            ",\"max_failures\":",
            vm.toString(uint256(p.maxFailures)),
            ",\"min_stake\":\"",
            vm.toString(p.minStake),
            "\"}}"
        );
        return string.concat(a, b, q, r);
    }

    /// @dev A number: `env` if set, else `key` of the TOML (an integer, or a string of
    ///      decimal digits for amounts past TOML's 64-bit integers), else `dflt`; refused
    ///      above `max` (the parameter's type), never truncated.
    function _uint(string memory toml, string memory key, string memory env, uint256 dflt, uint256 max)
        internal
        view
        returns (uint256 v)
    {
        v = dflt;
        if (bytes(toml).length != 0 && vm.keyExistsToml(toml, key)) {
            v = vm.parseTomlUint(toml, key);
        }
        v = vm.envOr(env, v);
        require(v <= max, string.concat("Deploy: ", env, " (", key, ") = ", vm.toString(v), " is too large"));
    }

    /// @dev Refuses a key of the file that is not one of ours (a typo would otherwise
    ///      deploy the default silently).
    function _checkKeys(string memory toml, string memory path) internal pure {
        string[12] memory known = [
            "token",
            "beacon",
            "out",
            "epoch_seconds",
            "answer_seconds",
            "grace_seconds",
            "upload_seconds",
            "exit_notice_epochs",
            "dispute_bond",
            "challenger_share_bps",
            "max_failures",
            "min_stake"
        ];
        string[] memory keys = vm.parseTomlKeys(toml, "$");
        for (uint256 i = 0; i < keys.length; i++) {
            bool ok = false;
            for (uint256 j = 0; j < known.length && !ok; j++) {
                ok = keccak256(bytes(keys[i])) == keccak256(bytes(known[j]));
            }
            require(
                ok,
                string.concat(
                    "Deploy: unknown key `",
                    keys[i],
                    "` in ",
                    path,
                    " (known: token, beacon, out, epoch_seconds, answer_seconds, grace_seconds, upload_seconds, exit_notice_epochs, dispute_bond, challenger_share_bps, max_failures, min_stake; the deployer's key comes from DEPLOYER_KEY only)"
                )
            );
        }
    }

    function _addr(string memory toml, string memory key) internal view returns (address) {
        if (bytes(toml).length != 0 && vm.keyExistsToml(toml, key)) {
            return vm.parseTomlAddress(toml, key);
        }
        return address(0);
    }

    function _str(string memory toml, string memory key) internal view returns (string memory) {
        if (bytes(toml).length != 0 && vm.keyExistsToml(toml, key)) {
            return vm.parseTomlString(toml, key);
        }
        return "";
    }

    function _log(string memory s) internal view {
        (bool ok,) = CONSOLE.staticcall(abi.encodeWithSignature("log(string)", s));
        ok;
    }
}
