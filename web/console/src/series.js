// day is a YYYY-MM-DD date's UTC midnight in seconds (uPlot's time unit).
export const day = (d) => Date.parse(`${d}T00:00:00Z`) / 1000;

// usageSeries turns usage rows ({day, model, ...}) into uPlot data: one x
// value per day (UTC midnight, seconds) and one series per model (rows
// without a model: "all"), each the sum of value(row) over that day's
// rows. With from and to (YYYY-MM-DD), every day between them is an x
// value, 0 where no row has it, so a quiet day shows as 0, not as a line
// drawn across it; rows outside them are left out.
export function usageSeries(rows, value, from, to) {
  let days;
  if (from && to) {
    days = [];
    for (let t = day(from); t <= day(to); t += 86400) days.push(new Date(t * 1000).toISOString().slice(0, 10));
  } else {
    days = [...new Set(rows.map((r) => r.day))].sort();
  }
  const idx = new Map(days.map((d, i) => [d, i]));
  const inRange = rows.filter((r) => idx.has(r.day));
  const models = [...new Set(inRange.map((r) => r.model || 'all'))].sort();
  const ys = models.map(() => days.map(() => 0));
  for (const r of inRange) ys[models.indexOf(r.model || 'all')][idx.get(r.day)] += value(r);
  return { models, data: [days.map(day), ...ys] };
}
