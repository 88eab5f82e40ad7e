// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;
import {Probe} from "../src/Probe.sol";
interface Vm { function sign(uint256, bytes32) external pure returns (uint8, bytes32, bytes32); function addr(uint256) external pure returns (address); function assertEq(address,address) external pure; }
contract ProbeTest { Vm constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));
  function testFuzz_rec(bytes32 h) public { Probe p = new Probe(); (uint8 v, bytes32 r, bytes32 s) = vm.sign(1, h); vm.assertEq(p.rec(h, abi.encodePacked(r, s, v)), vm.addr(1)); } }
