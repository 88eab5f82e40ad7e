// The node's read-only JSON API (node/src/dashboard/server.rs; shapes in
// node/src/dashboard/model.rs). The access token, if the page was opened as
// /?token=TOKEN, is sent as a bearer token.

export type EpochState = "proven" | "missed" | "challenged" | "pending" | "future";

export interface EpochCounts {
  proven: number;
  missed: number;
  challenged: number;
  pending: number;
  future: number;
}

export interface DigestRow {
  version: number;
  write_count: number;
  rebuild_count: number;
  num_blocks: number;
  /** The EIP-712 hash the contract stored (from `DigestPosted`). */
  hash: string;
  block: number;
  root_u: string;
  root_c: string;
  level_roots: string[];
  /** The owner's signature it was posted with (null: not readable from the posting transaction). */
  owner_sig: string | null;
  /** Set when it was posted by `resizeDeal` (the signatures cover the resize). */
  resize: { price_per_epoch: string; collateral: string } | null;
}

export interface AuditRow {
  id: number;
  epoch: number;
  version: number;
  passed: boolean;
  auditor: string;
  block: number;
}

export interface DisputeRow {
  id: number;
  challenger: string;
  version: number;
  state: string;
  deadline: number;
  block: number;
}

export interface Deal {
  id: number;
  owner: string;
  state: string;
  num_blocks: number;
  block_size: number;
  num_epochs: number;
  price_per_epoch: string;
  digest_version: number;
  write_count: number;
  failures: number;
  open_disputes: number;
  earned: string;
  slashed: string;
  epoch0_start: number;
  epoch_seconds: number;
  epochs: EpochState[];
  epoch_counts: EpochCounts;
  digests?: DigestRow[];
  audits?: AuditRow[];
  disputes?: DisputeRow[];
}

export interface Summary {
  provider: string;
  market: string;
  chain_id: number;
  block: number;
  chain_time: number;
  updated_at: number;
  error: string | null;
  deals: Record<string, number>;
  epochs: EpochCounts;
  tokens: { earned: string; slashed: string; owed: string };
  disputes: { open: number; answered: number; slashed: number };
  space: { stored_blocks: number; stored_bytes: number; disk_used_bytes: number; free_bytes: number };
}

export interface Sample {
  t: number;
  stored_bytes: number;
  disk_used_bytes: number;
  earned: number;
  owed: number;
  slashed: number;
}

const token = new URLSearchParams(window.location.search).get("token");

/** GET `path` (relative to the page) as JSON; throws with the status on failure. */
async function get<T>(path: string): Promise<T> {
  const headers: Record<string, string> = {};
  if (token) headers["Authorization"] = `Bearer ${token}`;
  const r = await fetch(new URL(path, window.location.href), { headers, cache: "no-store" });
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status} ${(await r.text()).trim()}`);
  return (await r.json()) as T;
}

export const summary = () => get<Summary>("api/summary");
export const deals = () => get<Deal[]>("api/deals");
export const deal = (id: number) => get<Deal>(`api/deals/${id}`);
export const series = () => get<Sample[]>("api/series");
