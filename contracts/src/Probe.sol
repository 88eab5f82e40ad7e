// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
contract Probe { function rec(bytes32 h, bytes calldata s) external pure returns (address) { return ECDSA.recover(h, s); } }
