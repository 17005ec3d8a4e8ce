// The status page served at GET /: plain HTML, CSS and a little script that polls /status
// every two seconds and draws the workers and three charts as SVG. Everything is in this
// one document, so the page works with no network beyond the server itself.
export const STATUS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Radixgate status</title>
<link rel="icon" href="data:,">
<style>
  :root { --bg: #f6f7f9; --card: #fff; --ink: #1d2330; --muted: #6b7280; --ok: #15803d; --bad: #b91c1c; --bar: #2563eb; --line: #e5e7eb; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--ink); }
  header { padding: 12px 16px; background: var(--ink); color: #fff; display: flex; flex-wrap: wrap; gap: 4px 16px; align-items: baseline; }
  header h1 { font-size: 18px; margin: 0; }
  header span { color: #cbd5e1; }
  main { padding: 12px; display: grid; gap: 12px; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); }
  section { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px; min-width: 0; }
  h2 { font-size: 15px; margin: 0 0 8px; display: flex; gap: 8px; align-items: center; }
  .badge { font-size: 12px; padding: 1px 8px; border-radius: 10px; color: #fff; }
  .up { background: var(--ok); } .down { background: var(--bad); }
  .meta { color: var(--muted); font-size: 12px; margin-bottom: 6px; }
  .kv { height: 8px; background: var(--line); border-radius: 4px; overflow: hidden; margin: 4px 0 8px; }
  .kv > div { height: 100%; background: var(--bar); }
  table { width: 100%; border-collapse: collapse; font-size: 12px; table-layout: fixed; }
  th, td { text-align: left; padding: 3px 4px; border-top: 1px solid var(--line); vertical-align: top; }
  th { color: var(--muted); font-weight: 500; }
  td.preview { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; font-family: ui-monospace, monospace; }
  .groups { display: flex; gap: 2px; align-items: flex-end; height: 28px; margin-top: 6px; }
  .groups div { flex: 1; background: var(--bar); min-height: 1px; }
  svg { width: 100%; height: 140px; display: block; }
  .legend { font-size: 12px; color: var(--muted); display: flex; flex-wrap: wrap; gap: 4px 12px; }
  .legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; border-radius: 2px; vertical-align: -1px; }
  #error { color: var(--bad); }
</style>
</head>
<body>
<header><h1>Radixgate</h1><span id="policy">policy …</span><span id="totals">…</span><span id="error"></span></header>
<main>
  <div id="workers" style="display: contents"></div>
  <section><h2>Requests per second</h2><svg id="chart-requests" viewBox="0 0 600 140" preserveAspectRatio="none"></svg><div class="legend" id="legend-requests"></div></section>
  <section><h2>Prompt tokens served from the KV cache</h2><svg id="chart-cached" viewBox="0 0 600 140" preserveAspectRatio="none"></svg><div class="legend" id="legend-cached"></div></section>
  <section><h2>Time to first token (ms)</h2><svg id="chart-ttft" viewBox="0 0 600 140" preserveAspectRatio="none"></svg><div class="legend" id="legend-ttft"></div></section>
</main>
<script>
"use strict";
const COLORS = ["#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#4b5563"];
const key = new URLSearchParams(location.hash.slice(1)).get("key");
const text = (value) => String(value).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
const ago = (ms) => (ms === null ? "never" : ms < 1000 ? "now" : ms < 60000 ? Math.round(ms / 1000) + " s ago" : Math.round(ms / 60000) + " min ago");

function workerCard(worker) {
  const use = worker.kvCapacityTokens > 0 ? worker.kvTokens / worker.kvCapacityTokens : 0;
  const rows = (worker.slotReports || []).map((slot) =>
    "<tr><td>" + slot.slot + "</td><td>" + slot.tokens + "</td><td class=preview title=\\"" + text(slot.preview) + "\\">" + text(slot.preview || "(empty)") +
    "</td><td>" + (slot.busy ? "running" : ago(slot.idleMs)) + "</td></tr>").join("");
  const groups = worker.waitingByGroup || [];
  const most = Math.max(1, ...groups);
  return '<section class="worker" data-worker="' + text(worker.id) + '"><h2>' + text(worker.id) +
    ' <span class="badge ' + (worker.alive ? "up" : "down") + '">' + (worker.alive ? "up" : "down") + "</span></h2>" +
    '<div class="meta">' + text(worker.model) + " · " + text(worker.engine) + (worker.url ? " at " + text(worker.url) : "") + " · " + text(worker.isolation) + " · tree " + text(worker.precision) + " · " + worker.running + "/" + worker.slots + " slots running · " +
    worker.queued + " queued · " + worker.restarts + " restarts</div>" +
    '<div class="meta">KV ' + worker.kvTokens + " / " + worker.kvCapacityTokens + " tokens (" + Math.round(use * 100) + '%)</div><div class="kv"><div style="width:' + (use * 100).toFixed(1) + '%"></div></div>' +
    "<table><thead><tr><th style=width:12%>slot</th><th style=width:16%>tokens</th><th>holds</th><th style=width:22%>last use</th></tr></thead><tbody>" +
    (rows || "<tr><td colspan=4>worker down</td></tr>") + "</tbody></table>" +
    '<div class="meta" style="margin-top:6px">waiting by priority group (hit ratio, low to high): ' + groups.reduce((a, b) => a + b, 0) + "</div>" +
    '<div class="groups">' + groups.map((n) => '<div title="' + n + '" style="height:' + ((n / most) * 100).toFixed(0) + '%"></div>').join("") + "</div></section>";
}

/** Lines (or stacked bars) over the window, scaled to the largest value. */
function chart(id, series, { stacked = false, max } = {}) {
  const svg = document.getElementById(id);
  const count = series[0] ? series[0].values.length : 0;
  const totals = Array.from({ length: count }, (_, i) => series.reduce((sum, s) => sum + (stacked ? s.values[i] || 0 : 0), 0));
  const top = max || Math.max(1e-9, ...(stacked ? totals : series.flatMap((s) => s.values.filter((v) => v !== null))));
  const x = (i) => (i / Math.max(1, count - 1)) * 600;
  const y = (v) => 135 - (v / top) * 125;
  let body = '<line x1="0" y1="135" x2="600" y2="135" stroke="#e5e7eb"/><text x="2" y="12" font-size="11" fill="#6b7280">' + (+top.toPrecision(3)) + "</text>";
  if (stacked) {
    const width = 600 / Math.max(1, count);
    const base = new Array(count).fill(0);
    series.forEach((s, k) => s.values.forEach((v, i) => {
      if (!v) return;
      body += '<rect x="' + (i * width).toFixed(1) + '" y="' + y(base[i] + v).toFixed(1) + '" width="' + Math.max(1, width - 1).toFixed(1) + '" height="' + (y(base[i]) - y(base[i] + v)).toFixed(1) + '" fill="' + COLORS[k % COLORS.length] + '"/>';
      base[i] += v;
    }));
  } else {
    series.forEach((s, k) => {
      const points = s.values.map((v, i) => (v === null ? null : x(i).toFixed(1) + "," + y(v).toFixed(1))).filter(Boolean);
      if (points.length) body += '<polyline fill="none" stroke-width="2" stroke="' + COLORS[k % COLORS.length] + '" points="' + points.join(" ") + '"/>';
      // A dot per bucket with data: a lone bucket draws no line.
      for (const point of points) body += '<circle r="3" fill="' + COLORS[k % COLORS.length] + '" cx="' + point.split(",")[0] + '" cy="' + point.split(",")[1] + '"/>';
    });
  }
  svg.innerHTML = body;
  document.getElementById(id.replace("chart", "legend")).innerHTML = series.map((s, k) => '<span><i style="background:' + COLORS[k % COLORS.length] + '"></i>' + text(s.name) + "</span>").join("");
}

function render(report) {
  document.getElementById("policy").textContent = "policy " + report.policy;
  const points = report.activity;
  const total = points.reduce((sum, p) => sum + p.requests, 0);
  document.getElementById("totals").textContent = total + (total === 1 ? " request" : " requests") + " in the last " + Math.round((points.length * report.bucketMs) / 60000) + " min";
  document.getElementById("totals").dataset.requests = String(total);
  document.getElementById("workers").innerHTML = report.workers.map(workerCard).join("");
  const seconds = report.bucketMs / 1000;
  const reasons = [...new Set(points.flatMap((p) => Object.keys(p.placements)))].sort();
  chart("chart-requests", reasons.length ? reasons.map((reason) => ({ name: reason, values: points.map((p) => (p.placements[reason] || 0) / seconds) })) : [{ name: "no requests", values: points.map(() => 0) }], { stacked: true });
  chart("chart-cached", [{ name: "cached fraction", values: points.map((p) => p.cachedFraction) }], { max: 1 });
  chart("chart-ttft", [
    { name: "p50", values: points.map((p) => p.ttftP50Ms) },
    { name: "p90", values: points.map((p) => p.ttftP90Ms) },
    { name: "p99", values: points.map((p) => p.ttftP99Ms) },
  ]);
}

async function refresh() {
  try {
    const response = await fetch("/status", { headers: key ? { authorization: "Bearer " + key } : {} });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error ? body.error.message : "HTTP " + response.status);
    document.getElementById("error").textContent = "";
    render(body);
  } catch (error) {
    document.getElementById("error").textContent = "status unavailable: " + error.message;
  }
}
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
`;
