// The wire protocol of docs/PROTOCOL.md (`/dpor/1`; `dpor_proto` in Rust), the public
// reads: libp2p over TCP + Noise + Yamux, one request-response pair per stream, each
// frame a u32 big-endian body length then a CBOR body (maps with text keys, byte
// strings for bytes, enum variants as one-key maps or text; PROTOCOL.md "CBOR mapping").
import { createLibp2p, type Libp2p } from 'libp2p'
import { tcp } from '@libp2p/tcp'
import { noise } from '@chainsafe/libp2p-noise'
import { yamux } from '@chainsafe/libp2p-yamux'
import { multiaddr, type Multiaddr } from '@multiformats/multiaddr'
import { Encoder } from 'cbor-x'
import { concat, equalBytes, toHex, u32be } from './bytes.js'
import { blockRoot, rootFromPath, uLeaf } from './merkle.js'

// js-libp2p 3 calls Promise.withResolvers (Node.js 22+); this is its standard
// definition, for Node.js 20.
const P = Promise as unknown as { withResolvers?: unknown }
if (typeof P.withResolvers !== 'function') {
  P.withResolvers = function withResolvers<T> (this: PromiseConstructor) {
    let resolve!: (v: T) => void
    let reject!: (e: unknown) => void
    const promise = new this<T>((res, rej) => { resolve = res; reject = rej })
    return { promise, resolve, reject }
  }
}

/** The protocol name negotiated on every stream. */
export const PROTOCOL = '/dpor/1'
/** Largest frame body each way (docs/PROTOCOL.md, Limits). */
export const MAX_FRAME_BYTES = 8 * 1024 * 1024
/** Payload per batch: `messages::MAX_BATCH_BYTES`. */
export const MAX_BATCH_BYTES = 4 * 1024 * 1024

/** Items of `itemBytes` bytes each that one request may carry: `max(1, ⌊4 MiB / max(1, b)⌋)`. */
export function batchLen (itemBytes: number): number {
  return Math.max(1, Math.floor(MAX_BATCH_BYTES / Math.max(1, itemBytes)))
}

const cbor = new Encoder({ useRecords: false, mapsAsObjects: true, tagUint8Array: false, variableMapSize: true } as ConstructorParameters<typeof Encoder>[0])

/** A frame body: the CBOR of `value` as docs/PROTOCOL.md maps it (maps with text keys, byte strings, no record extension). */
export function encodeBody (value: unknown): Uint8Array {
  return cbor.encode(value) as Uint8Array
}

/** A frame body decoded (byte strings as `Uint8Array`s, maps as objects). */
export function decodeBody (body: Uint8Array): unknown {
  return cbor.decode(body)
}

/** An `Error { code, message }` answer of the node (`code` an `ErrorCode` name such as `UnknownDeal`). */
export class NodeError extends Error {
  /** The error code, e.g. `UnknownRun`, `TooLarge`. */
  readonly code: string
  constructor (code: string, message: string) {
    super(`the node answered ${code}: ${message}`)
    this.code = code
  }
}

/** A run's name on the wire (`WireRun`): tag 0 is C, ℓ + 1 level ℓ; `built_at` the total writes when it was built. */
export interface WireRun {
  /** The run tag. */
  tag: number
  /** Total writes (rebuilds·N + t) when the run was built. */
  built_at: bigint
}

/** One coded block of a run as a node returns it for `Samples`. */
export interface WireSample {
  /** Position in the run. */
  position: bigint
  /** The coded block (8·s bytes; empty if the node cannot read it). */
  block: Uint8Array
  /** Its run path, leaf to root (a prefix if the node's tree is damaged). */
  path: Uint8Array[]
}

/** A block of U read and verified against a trusted rootU. */
export interface VerifiedRead {
  /** The index in U. */
  index: bigint
  /** The β bytes of U[index]. */
  block: Uint8Array
  /** σ̃_U(index), 32 bytes. */
  sealedU: Uint8Array
  /** The root the path leads to (equal to the trusted rootU). */
  rootU: Uint8Array
}

type Obj = Record<string, unknown>

function asObj (v: unknown, what: string): Obj {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error(`${what}: not a map`)
  return v as Obj
}
function asBytes (v: unknown, what: string, len?: number): Uint8Array {
  if (!(v instanceof Uint8Array)) throw new Error(`${what}: not a byte string`)
  if (len !== undefined && v.length !== len) throw new Error(`${what}: ${v.length} bytes, expected ${len}`)
  return new Uint8Array(v)
}
function asInt (v: unknown, what: string): bigint {
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v)
  if (typeof v === 'bigint' && v >= 0n) return v
  throw new Error(`${what}: not an unsigned integer`)
}
function asArray (v: unknown, what: string): unknown[] {
  if (!Array.isArray(v)) throw new Error(`${what}: not an array`)
  return v
}
/** A u64 for the CBOR encoder: a number when it is safe, else a bigint (encoded as uint64). */
function u64 (n: bigint | number): number | bigint {
  return BigInt(n) <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : BigInt(n)
}

/** The body of a response frame decoded, with `Error` answers thrown as {@link NodeError}; returns `[variant, value]`. */
function variant (resp: unknown): [string, unknown] {
  if (typeof resp === 'string') return [resp, null]
  const o = asObj(resp, 'response')
  const keys = Object.keys(o)
  if (keys.length !== 1) throw new Error(`response: a one-key map expected, got keys ${JSON.stringify(keys)}`)
  const k = keys[0]!
  if (k === 'Error') {
    const e = asObj(o.Error, 'Error')
    throw new NodeError(String(e.code), String(e.message))
  }
  return [k, o[k]]
}

/** How long a request waits for its answer by default: 300 s, as the Rust client (`net::NetConfig`). */
export const REQUEST_TIMEOUT_MS = 300_000

/** A client of one dpor node: a libp2p peer (TCP, Noise, Yamux) connected to it. Call {@link NodeClient.stop} when done. */
export class NodeClient {
  private constructor (private readonly libp2p: Libp2p, readonly addr: Multiaddr) {}

  /** Milliseconds a request waits for its whole answer before it fails. */
  timeoutMs = REQUEST_TIMEOUT_MS

  /** Bytes received in answer frames so far (prefixes included). */
  bytesReceived = 0

  /** Starts a libp2p peer and connects it to the node at `addr` (`/ip4/…/tcp/…/p2p/<peer id>`; Noise checks the peer id); throws if the node cannot be reached. */
  static async connect (addr: string | Multiaddr): Promise<NodeClient> {
    const ma = typeof addr === 'string' ? multiaddr(addr) : addr
    const libp2p = await createLibp2p({ transports: [tcp()], connectionEncrypters: [noise()], streamMuxers: [yamux()] })
    try {
      await libp2p.dial(ma)
    } catch (e) {
      await libp2p.stop()
      throw e
    }
    return new NodeClient(libp2p, ma)
  }

  /** Stops the libp2p peer (closes its connections). */
  async stop (): Promise<void> {
    await this.libp2p.stop()
  }

  /** Sends one request (a JS value the CBOR mapping encodes) and returns the decoded answer body. */
  async request (req: unknown): Promise<unknown> {
    const body = encodeBody(req)
    return this.exchange(concat(u32be(body.length), body))
  }

  /**
   * Sends one whole frame on a new stream, closes the write side, reads the answer
   * frame and decodes it. Throws if the stream ends early, the answer is over the
   * limit, or it does not come within {@link NodeClient.timeoutMs}.
   */
  async exchange (frame: Uint8Array): Promise<unknown> {
    const signal = AbortSignal.timeout(this.timeoutMs)
    const stream = await this.libp2p.dialProtocol(this.addr, PROTOCOL, { signal })
    const onTimeout = (): void => stream.abort(new Error(`no answer from the node within ${this.timeoutMs} ms`))
    signal.addEventListener('abort', onTimeout)
    const chunks: Uint8Array[] = []
    let got = 0
    try {
      stream.send(frame)
      await stream.close({ signal }) // our write side: the request is complete
      for await (const chunk of stream) {
        const bytes = chunk instanceof Uint8Array ? chunk : chunk.subarray()
        chunks.push(bytes)
        got += bytes.length
        if (got > 4 + MAX_FRAME_BYTES) {
          stream.abort(new Error('response over the frame limit'))
          throw new Error('response over the frame limit')
        }
      }
    } finally {
      signal.removeEventListener('abort', onTimeout)
    }
    this.bytesReceived += got
    const all = concat(...chunks)
    if (all.length < 4) throw new Error('the stream ended before the length prefix')
    const len = new DataView(all.buffer, all.byteOffset).getUint32(0)
    if (all.length !== 4 + len) throw new Error(`response frame: prefix says ${len} bytes, got ${all.length - 4}`)
    return decodeBody(all.subarray(4))
  }

  /** `Status { deal }`: the node's `DealStatus` of the deal, as decoded (snake_case keys). */
  async status (deal: bigint | number): Promise<Obj> {
    const [k, v] = variant(await this.request({ Status: { deal: u64(deal) } }))
    if (k !== 'Status') throw new Error(`unexpected answer ${k} to Status`)
    return asObj(v, 'Status')
  }

  /**
   * `Read { deal, index }`, verified: the block's U leaf (ENCODING §4, with its block
   * root §2) and path must lead to `rootU`, else this throws. Node errors throw {@link NodeError}.
   */
  async read (deal: bigint | number, index: bigint | number, rootU: Uint8Array): Promise<VerifiedRead> {
    const i = BigInt(index)
    const [k, v] = variant(await this.request({ Read: { deal: u64(deal), index: u64(i) } }))
    if (k !== 'Block') throw new Error(`unexpected answer ${k} to Read`)
    const b = asObj(v, 'Block')
    const got = asInt(b.index, 'Block.index')
    if (got !== i) throw new Error(`answer for index ${got}, asked ${i}`)
    const block = asBytes(b.block, 'Block.block')
    const sealedU = asBytes(b.sealed_u, 'Block.sealed_u', 32)
    const path = asArray(b.path, 'Block.path').map((p, h) => asBytes(p, `Block.path[${h}]`, 32))
    const root = rootFromPath(uLeaf(i, blockRoot(block), sealedU), i, path)
    if (i >> BigInt(path.length) !== 0n) throw new Error('the path is too short for the index')
    if (!equalBytes(root, rootU)) throw new Error(`the block does not verify: its path leads to ${toHex(root)}, not rootU ${toHex(rootU)}`)
    return { index: i, block, sealedU, rootU: root }
  }

  /** `Samples { deal, run, positions }`: the coded blocks and run paths, unverified (see `verifyAudit`), in the order asked. */
  async samples (deal: bigint | number, run: WireRun, positions: readonly bigint[]): Promise<WireSample[]> {
    const req = { Samples: { deal: u64(deal), run: { tag: run.tag, built_at: u64(run.built_at) }, positions: positions.map(u64) } }
    const [k, v] = variant(await this.request(req))
    if (k !== 'Samples') throw new Error(`unexpected answer ${k} to Samples`)
    const o = asObj(v, 'Samples')
    const r = asObj(o.run, 'Samples.run')
    if (Number(r.tag) !== run.tag || asInt(r.built_at, 'Samples.run.built_at') !== run.built_at) {
      throw new Error(`samples answered for run ${String(r.tag)}@${String(r.built_at)}, asked ${run.tag}@${run.built_at}`)
    }
    const samples = asArray(o.samples, 'Samples.samples')
    if (samples.length !== positions.length) throw new Error(`${samples.length} samples answered, ${positions.length} asked`)
    return samples.map((s, j) => {
      const so = asObj(s, `sample ${j}`)
      return {
        position: asInt(so.position, `sample ${j} position`),
        block: asBytes(so.block, `sample ${j} block`),
        path: asArray(so.path, `sample ${j} path`).map((p, h) => asBytes(p, `sample ${j} path[${h}]`, 32))
      }
    })
  }
}
