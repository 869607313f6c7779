import uPlot from 'uplot';
import { useEffect, useRef } from 'preact/hooks';
import { html } from './ui.js';
import { day } from './series.js';

export { usageSeries } from './series.js';

const palette = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#4b5563'];

// Chart draws one uPlot chart; it is rebuilt when its data change.
// from and to (YYYY-MM-DD) fix the x range to the period asked for.
export function Chart({ title, models, data, unit, from, to }) {
  const el = useRef(null);
  useEffect(() => {
    if (!el.current || !data || data.length < 2) return undefined;
    const width = Math.max(320, el.current.clientWidth || 640);
    const opts = {
      title, width, height: 260,
      scales: { x: { time: true, range: (u, lo, hi) => (from && to ? [day(from), day(to) + 86400] : [lo, hi]) } },
      axes: [{}, { label: unit, size: 80, values: (u, vals) => vals.map((v) => String(+v.toFixed(6))) }],
      series: [{}, ...models.map((m, i) => ({
        label: m, stroke: palette[i % palette.length], width: 2,
        points: { show: true, size: 5 },
        value: (u, v) => (v == null ? '—' : v.toFixed(6)),
      }))],
    };
    const plot = new uPlot(opts, data, el.current);
    return () => plot.destroy();
  }, [data, models, title, unit, from, to]);
  if (!data || data.length < 2) return html`<p class="empty">No usage in this period.</p>`;
  return html`<div class="chart" ref=${el}></div>`;
}
