// The time-series plots (uPlot): space held and on disk, and money earned, owed and
// slashed, from /api/series. Created once, then fed new data on each refresh.

import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { Sample } from "./api";
import { bytes } from "./format";

interface Plot {
  plot: uPlot;
  pick: (s: Sample) => number[];
}

const plots: Plot[] = [];

function make(el: HTMLElement, labels: string[], colors: string[], value: (v: number) => string, pick: Plot["pick"]) {
  const opts: uPlot.Options = {
    width: Math.max(280, el.clientWidth),
    height: 200,
    series: [
      {},
      ...labels.map((label, i) => ({ label, stroke: colors[i], width: 2, value: (_u: uPlot, v: number | null) => (v == null ? "—" : value(v)) })),
    ],
    axes: [{}, { values: (_u: uPlot, vals: number[]) => vals.map(value), size: 80 }],
    legend: { live: true },
  };
  const empty = [[], ...labels.map(() => [])] as uPlot.AlignedData;
  plots.push({ plot: new uPlot(opts, empty, el), pick });
}

/** Creates the plots in their containers. */
export function initPlots(space: HTMLElement, money: HTMLElement): void {
  make(space, ["stored data", "on disk"], ["#2563eb", "#9333ea"], bytes, (s) => [s.stored_bytes, s.disk_used_bytes]);
  const compact = (v: number) => (Math.abs(v) >= 1e6 ? v.toExponential(2) : String(Math.round(v)));
  make(money, ["earned", "owed", "slashed"], ["#16a34a", "#ca8a04", "#dc2626"], compact, (s) => [s.earned, s.owed, s.slashed]);
  window.addEventListener("resize", () => {
    for (const p of plots) p.plot.setSize({ width: Math.max(280, p.plot.root.parentElement?.clientWidth ?? 280), height: 200 });
  });
}

/** Shows `samples` (oldest first) in every plot. */
export function updatePlots(samples: Sample[]): void {
  for (const p of plots) {
    const n = p.pick(samples[0] ?? ({} as Sample)).length;
    const cols: number[][] = [samples.map((s) => s.t)];
    for (let i = 0; i < n; i++) cols.push(samples.map((s) => p.pick(s)[i]));
    p.plot.setData(cols as uPlot.AlignedData);
  }
}
