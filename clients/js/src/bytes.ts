// Byte helpers shared by the wire, Merkle and audit modules.
import { keccak_256 } from '@noble/hashes/sha3.js'
import type { Hex } from 'viem'

/** keccak256 of `data`, as 32 bytes. */
export function keccak (data: Uint8Array): Uint8Array {
  return keccak_256(data)
}

/** The bytes of a hex string (with or without `0x`); throws on odd length or a non-hex digit. */
export function hexToBytes (hex: string): Uint8Array {
  const h = hex.startsWith('0x') ? hex.slice(2) : hex
  if (!/^[0-9a-fA-F]*$/.test(h) || h.length % 2 !== 0) throw new Error(`not hex: ${hex}`)
  const out = new Uint8Array(h.length / 2)
  for (let i = 0; i < out.length; i++) out[i] = parseInt(h.slice(2 * i, 2 * i + 2), 16)
  return out
}

/** `0x`-prefixed lowercase hex of `bytes`. */
export function toHex (bytes: Uint8Array): Hex {
  return `0x${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex')}`
}

/** The concatenation of `parts`. */
export function concat (...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let o = 0
  for (const p of parts) {
    out.set(p, o)
    o += p.length
  }
  return out
}

/** 8-byte big-endian encoding of an unsigned integer below 2^64. */
export function u64be (n: number | bigint): Uint8Array {
  const b = new Uint8Array(8)
  new DataView(b.buffer).setBigUint64(0, BigInt(n))
  return b
}

/** 4-byte big-endian encoding of an unsigned integer below 2^32. */
export function u32be (n: number): Uint8Array {
  const b = new Uint8Array(4)
  new DataView(b.buffer).setUint32(0, n)
  return b
}

/** 32-byte big-endian ABI word of an unsigned integer below 2^256. */
export function word (n: number | bigint): Uint8Array {
  return hexToBytes(BigInt(n).toString(16).padStart(64, '0'))
}

/** True iff `a` and `b` hold the same bytes. */
export function equalBytes (a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i])
}

/** A 32-byte big-endian word read as an unsigned integer. */
export function wordToBigInt (b: Uint8Array): bigint {
  return b.length === 0 ? 0n : BigInt(toHex(b))
}
