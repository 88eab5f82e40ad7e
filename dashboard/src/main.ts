// The dashboard page: polls the node's API every 2 s and redraws. The selected deal
// (its detail and history) is the one in the URL's #deal=ID, else the newest.

import "./style.css";
import * as api from "./api";
import { initPlots, updatePlots } from "./plots";
import { checkDigests } from "./verify";
import { renderCards, renderDeals, renderDetail, renderHeader } from "./view";

const REFRESH_MS = 2000;

function selectedFromHash(): number | null {
  const m = /deal=(\d+)/.exec(window.location.hash);
  return m ? Number(m[1]) : null;
}

async function refresh(): Promise<void> {
  const [summary, deals, series] = await Promise.all([api.summary(), api.deals(), api.series()]);
  renderHeader(summary);
  renderCards(summary);
  const chosen = selectedFromHash() ?? (deals.length ? deals[deals.length - 1].id : null);
  renderDeals(deals, chosen);
  const detail = chosen !== null && deals.some((d) => d.id === chosen) ? await api.deal(chosen) : null;
  renderDetail(detail, detail ? await checkDigests(detail, summary.chain_id, summary.market) : new Map());
  updatePlots(series);
  document.body.dataset.loaded = "true";
}

async function loop(): Promise<void> {
  try {
    await refresh();
  } catch (e) {
    document.getElementById("status")!.innerHTML = `<span class="bad">${String(e).replace(/</g, "&lt;")}</span>`;
  }
  window.setTimeout(loop, REFRESH_MS);
}

initPlots(document.getElementById("plot-space")!, document.getElementById("plot-money")!);
window.addEventListener("hashchange", () => void refresh());
void loop();
