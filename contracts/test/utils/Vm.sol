// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice The Foundry cheatcodes these tests use (no forge-std on npm; DESIGN §11).
interface Vm {
    function prank(address) external;
    function startPrank(address) external;
    function stopPrank() external;
    function expectRevert() external;
    function expectRevert(bytes4) external;
    function expectRevert(bytes calldata) external;
    function sign(uint256, bytes32) external pure returns (uint8, bytes32, bytes32);
    function addr(uint256) external pure returns (address);
    function roll(uint256) external;
    function warp(uint256) external;
    function chainId(uint256) external;
    function setBlockhash(uint256, bytes32) external;
    function assume(bool) external pure;
    function assertEq(uint256, uint256) external pure;
    function assertEq(uint256, uint256, string calldata) external pure;
    function assertEq(bytes32, bytes32) external pure;
    function assertEq(bytes32, bytes32, string calldata) external pure;
    function assertEq(address, address) external pure;
    function assertEq(bool, bool) external pure;
    function assertEq(bytes calldata, bytes calldata) external pure;
    function assertEq(string calldata, string calldata) external pure;
    function assertNotEq(bytes32, bytes32) external pure;
    function assertTrue(bool) external pure;
    function assertTrue(bool, string calldata) external pure;
    function assertFalse(bool) external pure;
    function assertFalse(bool, string calldata) external pure;
    function assertLt(uint256, uint256) external pure;
    function assertLe(uint256, uint256) external pure;
    function assertGe(uint256, uint256) external pure;
    function readFile(string calldata) external view returns (string memory);
    function exists(string calldata) external view returns (bool);
    function keyExistsJson(string calldata, string calldata) external view returns (bool);
    function parseJsonUint(string calldata, string calldata) external pure returns (uint256);
    function parseJsonUintArray(string calldata, string calldata) external pure returns (uint256[] memory);
    function parseJsonBytes32(string calldata, string calldata) external pure returns (bytes32);
    function parseJsonBytes32Array(string calldata, string calldata) external pure returns (bytes32[] memory);
    function parseJsonBytes(string calldata, string calldata) external pure returns (bytes memory);
    function parseJsonAddress(string calldata, string calldata) external pure returns (address);
    function envOr(string calldata, uint256) external view returns (uint256);
    function toString(uint256) external pure returns (string memory);
    function startBroadcast(uint256) external;
    function stopBroadcast() external;
    function etch(address, bytes calldata) external;
    function cool(address) external;
    function expectEmit(bool, bool, bool, bool, address) external;
    function mockCall(address, bytes calldata, bytes calldata) external;

    /// @notice A log recorded by {recordLogs}.
    struct Log {
        bytes32[] topics;
        bytes data;
        address emitter;
    }

    function recordLogs() external;
    function getRecordedLogs() external returns (Log[] memory);
}

/// @notice Minimal test base: the cheatcode handle and a DSTest-style log event forge prints.
abstract contract TestBase {
    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    event log_named_uint(string key, uint256 val);
}
