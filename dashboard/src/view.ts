// Rendering of the overview cards, the deals table and the selected deal's detail.

import type { Deal, Summary } from "./api";
import { amount, amountShort, bytes, esc, short, time } from "./format";
import { strip } from "./strip";
import type { DigestCheck } from "./verify";

function card(label: string, value: string, sub = "", id = ""): string {
  return `<div class="card"${id ? ` data-card="${id}"` : ""}><div class="label">${esc(label)}</div><div class="value">${value}</div><div class="sub">${sub}</div></div>`;
}

export function renderHeader(s: Summary): void {
  const who = document.getElementById("who")!;
  who.innerHTML = `provider <code title="${esc(s.provider)}">${esc(s.provider)}</code> · market <code>${esc(short(s.market))}</code> · chain ${s.chain_id}`;
  const st = document.getElementById("status")!;
  st.innerHTML = s.error
    ? `<span class="bad">chain unreachable: ${esc(s.error)}</span>`
    : `block ${s.block} · chain time ${esc(time(s.chain_time))} · updated ${esc(time(s.updated_at))}`;
}

export function renderCards(s: Summary): void {
  const active = s.deals["active"] ?? 0;
  const total = Object.values(s.deals).reduce((a, b) => a + b, 0);
  const e = s.epochs;
  document.getElementById("cards")!.innerHTML = [
    card("Deals", `${total}`, `${active} active`, "deals"),
    card("Epochs", `<span class="ok">${e.proven}</span> / <span class="bad">${e.missed}</span> / <span class="warn">${e.pending}</span>`, "proven / missed / pending", "epochs"),
    card("Stored", esc(bytes(s.space.stored_bytes)), `${s.space.stored_blocks} blocks · ${esc(bytes(s.space.disk_used_bytes))} on disk · ${esc(bytes(s.space.free_bytes))} free`, "space"),
    card(
      "Earned",
      `<span title="${esc(amount(s.tokens.earned))}">${esc(amountShort(s.tokens.earned))}</span>`,
      `owed ${esc(amountShort(s.tokens.owed))} · slashed ${esc(amountShort(s.tokens.slashed))} (token base units)`,
      "earned",
    ),
    card("Disputes", `${s.disputes.open} open`, `${s.disputes.answered} answered · ${s.disputes.slashed} lost`, "disputes"),
  ].join("");
}

export function renderDeals(list: Deal[], selected: number | null): void {
  const body = document.querySelector("#deals tbody")!;
  document.getElementById("no-deals")!.hidden = list.length > 0;
  body.innerHTML = list
    .map((d) => {
      const c = d.epoch_counts;
      return `<tr data-deal-id="${d.id}" class="${d.id === selected ? "selected" : ""}">
        <td><a href="#deal=${d.id}">#${d.id}</a></td>
        <td data-field="state">${esc(d.state)}</td>
        <td data-field="size">${d.num_blocks} × ${esc(bytes(d.block_size))}</td>
        <td>${strip(d)}</td>
        <td data-field="proven" class="ok">${c.proven}</td>
        <td data-field="missed" class="bad">${c.missed}</td>
        <td data-field="pending" class="warn">${c.pending}</td>
        <td data-field="digest">v${d.digest_version} (t = ${d.write_count})</td>
        <td data-field="earned">${esc(amount(d.earned))}</td>
        <td data-field="disputes">${d.open_disputes}</td>
      </tr>`;
    })
    .join("");
}

/** The digest row's computed-hash and owner-signature cells. */
function checkCells(c: DigestCheck | undefined): string {
  if (!c) return `<td class="muted">…</td><td class="muted">…</td>`;
  const verdict = c.verified ? `<span class="ok">verified</span>` : `<span class="bad">not verified</span>`;
  return `<td data-field="computed-hash" data-hash="${esc(c.hash)}" class="${c.hashMatches ? "ok" : "bad"}"><code title="${esc(c.hash)}">${esc(short(c.hash))}</code></td>
    <td data-field="owner-sig" data-verified="${c.verified}" title="${esc(c.reason || `signed by the owner ${c.signer ?? ""}`)}">${verdict}</td>`;
}

export function renderDetail(d: Deal | null, checks: Map<number, DigestCheck> = new Map()): void {
  const el = document.getElementById("detail")!;
  el.hidden = d === null;
  if (!d) return;
  const digests = (d.digests ?? [])
    .slice()
    .reverse()
    .map(
      (g) =>
        `<tr data-version="${g.version}"><td>v${g.version}${g.resize ? " (resize)" : ""}</td><td>${g.num_blocks}</td><td>${g.write_count}</td><td>${g.rebuild_count}</td><td data-field="chain-hash"><code title="${esc(g.hash)}">${esc(short(g.hash))}</code></td>${checkCells(checks.get(g.version))}<td>${g.block}</td></tr>`,
    )
    .join("");
  const audits = (d.audits ?? [])
    .slice()
    .reverse()
    .map((a) => `<tr><td>${a.id}</td><td>${a.epoch}</td><td>v${a.version}</td><td class="${a.passed ? "ok" : "bad"}">${a.passed ? "passed" : "failed"}</td><td><code>${esc(short(a.auditor))}</code></td><td>${a.block}</td></tr>`)
    .join("");
  const disputes = (d.disputes ?? [])
    .map((q) => `<tr><td>${q.id}</td><td>v${q.version}</td><td>${esc(q.state)}</td><td><code>${esc(short(q.challenger))}</code></td><td>${esc(time(q.deadline))}</td></tr>`)
    .join("");
  const none = (cols: number, what: string) => `<tr><td colspan="${cols}" class="muted">no ${what} yet</td></tr>`;
  el.innerHTML = `
    <h2>Deal #${d.id} <span class="muted">(${esc(d.state)})</span></h2>
    <p>owner <code>${esc(d.owner)}</code> · ${d.num_blocks} blocks of ${esc(bytes(d.block_size))} ·
       ${esc(amount(d.price_per_epoch))} per proven epoch · earned <span data-field="deal-earned">${esc(amount(d.earned))}</span> ·
       slashed ${esc(amount(d.slashed))} · faults ${d.failures}</p>
    <h3>Epochs</h3>
    ${strip(d, true)}
    <p class="legend"><span class="cell proven"></span> proven <span class="cell missed"></span> missed
      <span class="cell challenged"></span> challenged <span class="cell pending"></span> pending <span class="cell future"></span> not started</p>
    <div class="cols">
      <div><h3>Digest history</h3><table data-table="digests"><thead><tr><th>Version</th><th>N</th><th>t</th><th>Rebuilds</th><th title="as the contract stored it">Hash (chain)</th><th title="EIP-712, computed in this page with @dpor/client">Hash (page)</th><th title="the owner's signature recovers to the deal's owner">Owner signature</th><th>Block</th></tr></thead><tbody>${digests || none(8, "digests")}</tbody></table></div>
      <div><h3>Audits</h3><table data-table="audits"><thead><tr><th>Id</th><th>Epoch</th><th>Digest</th><th>Result</th><th>Auditor</th><th>Block</th></tr></thead><tbody>${audits || none(6, "audits")}</tbody></table></div>
    </div>
    <h3>Disputes</h3>
    <table data-table="disputes"><thead><tr><th>Id</th><th>Digest</th><th>State</th><th>Challenger</th><th>Deadline</th></tr></thead><tbody>${disputes || none(5, "disputes")}</tbody></table>`;
}
