// The CBOR mapping of docs/PROTOCOL.md: the byte-exact examples it gives.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { batchLen, decodeBody, encodeBody, toHex } from '../dist/index.js'

test('Read { deal: 1, index: 2 } encodes as docs/PROTOCOL.md says', () => {
  assert.equal(toHex(encodeBody({ Read: { deal: 1, index: 2 } })), '0xa16452656164a2646465616c0165696e64657802')
})

test('unit variants are text strings; byte strings decode as bytes', () => {
  assert.equal(decodeBody(Uint8Array.from(Buffer.from('684163636570746564', 'hex'))), 'Accepted')
  const body = encodeBody({ Block: { index: 3, block: new Uint8Array([1, 2, 3]), sealed_u: new Uint8Array(32), path: [] } })
  // 0x43 = a byte string of 3 bytes (not a tagged typed array).
  assert.ok(toHex(body).includes('43010203'), toHex(body))
  const back = decodeBody(body)
  assert.ok(back.Block.block instanceof Uint8Array)
  assert.deepEqual([...back.Block.block], [1, 2, 3])
})

test('batch lengths follow docs/PROTOCOL.md', () => {
  assert.equal(batchLen(4696 + 32 * 40), Math.floor(4194304 / (4696 + 1280)))
  assert.equal(batchLen(0), 4194304)
  assert.equal(batchLen(5_000_000), 1)
})
