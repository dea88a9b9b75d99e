// Overview: balance, spend per day (an inline SVG chart), totals and spend by model.

import { api } from "./api.js";
import { byId, formatDay, h, setError, svg, text } from "./dom.js";

const DAYS = 30;

export function createOverview(app) {
  byId("overview-refresh").addEventListener("click", () => load());
  // The chart is drawn at the width it is shown at (its text stays readable on phones).
  let daily = null;
  let drawnWidth = 0;
  const container = byId("daily-chart");
  new ResizeObserver(() => {
    const width = container.clientWidth;
    if (daily && width && Math.abs(width - drawnWidth) > 24) {
      drawnWidth = width;
      container.replaceChildren(dailyChart(daily, width));
    }
  }).observe(container);

  async function load() {
    const epoch = app.epoch;
    setError(byId("overview-error"), "");
    let usage;
    try {
      usage = await api(`/v1/usage?days=${DAYS}`);
    } catch (error) {
      if (epoch === app.epoch) setError(byId("overview-error"), `Could not load usage: ${error.message}`);
      return;
    }
    if (epoch !== app.epoch) return;
    app.setUsage(usage);
    render(usage);
    daily = usage.daily ?? [];
    drawnWidth = container.clientWidth || 720;
    container.replaceChildren(dailyChart(daily, drawnWidth));
  }

  /** Forgets what was shown (on sign-out). */
  function reset() {
    daily = null;
    container.replaceChildren();
    byId("by-model").tBodies[0].replaceChildren();
    for (const id of ["balance", "total-requests", "error-rate", "total-spend"]) byId(id).textContent = "—";
    for (const id of ["balance-note", "total-tokens", "total-errors", "total-usd"]) byId(id).textContent = "";
    setError(byId("overview-error"), "");
  }

  return { load, reset };
}

function render(usage) {
  const totals = usage.totals ?? {};
  byId("balance").replaceChildren(h("span", { class: "num", text: text(usage.balance_inr) }), " ",
    h("span", { class: "unit", text: "INR" }));
  const notes = [`credits ${text(usage.credits_inr)}`, `spent ${text(usage.spent_inr)}`];
  if (usage.held_inr !== undefined && usage.held_inr !== "0") {
    notes.push(`reserved by running requests ${text(usage.held_inr)}`);
  }
  if (usage.escrow_inr !== undefined && usage.escrow_inr !== "0") {
    notes.push(`taken ahead (escrow) ${text(usage.escrow_inr)}`);
  }
  byId("balance-note").textContent = notes.join(" · ") + " INR";
  for (const period of document.querySelectorAll("#overview .period")) {
    period.textContent = `(${usage.days ?? DAYS} days)`;
  }
  byId("total-requests").textContent = text(totals.requests, "0");
  byId("total-tokens").textContent =
    `${text(totals.prompt_tokens, "0")} prompt / ${text(totals.completion_tokens, "0")} completion tokens`;
  byId("error-rate").textContent = percent(totals.error_rate);
  byId("total-errors").textContent = `${text(totals.errors, "0")} failed`;
  byId("total-spend").replaceChildren(h("span", { class: "num", text: text(totals.spend_inr, "0") }), " ",
    h("span", { class: "unit", text: "INR" }));
  byId("total-usd").textContent = `${text(totals.cost_usd, "0")} USD at cost`;
  byId("by-model").tBodies[0].replaceChildren(...byModelRows(usage.by_model ?? []));
}

function percent(rate) {
  if (rate === null || rate === undefined) return "—";
  return `${(Number(rate) * 100).toFixed(2)} %`;
}

function byModelRows(rows) {
  if (!rows.length) {
    return [h("tr", {}, h("td", { colspan: 7, class: "muted", text: "No requests in this period." }))];
  }
  return rows.map((row) => h("tr", {},
    h("td", { text: row.model }),
    h("td", { class: "n", text: text(row.requests, "0") }),
    h("td", { class: "n", text: text(row.errors, "0") }),
    h("td", { class: "n", text: text(row.spend_inr, "0") }),
    h("td", { class: "n", text: text(row.cost_usd, "0") }),
    h("td", { class: "n", text: text(row.prompt_tokens, "0") }),
    h("td", { class: "n", text: text(row.completion_tokens, "0") })));
}

/** The spend per day as bars, one <g> per day with a <title> tooltip, and axis labels. */
function dailyChart(days, availableWidth) {
  const width = Math.max(280, Math.round(availableWidth)), height = width < 500 ? 200 : 240;
  const right = 12, top = 14, bottom = 30;
  // Bar heights are geometry, not money: Number() of the exact text is only used to scale them.
  const values = days.map((day) => Number(day.spend_inr ?? 0));
  let maxIndex = -1;
  values.forEach((value, index) => {
    if (value > 0 && (maxIndex < 0 || value > values[maxIndex])) maxIndex = index;
  });
  const max = maxIndex >= 0 ? values[maxIndex] : 0;
  const maxLabel = max > 0 ? String(days[maxIndex].spend_inr) : "0";
  const left = Math.max(44, 30 + maxLabel.length * 7.5);
  const plotWidth = width - left - right, plotHeight = height - top - bottom;
  const label = days.length
    ? `Spend per day from ${days[0].date} to ${days[days.length - 1].date}` : "No data";
  const chart = svg("svg", {
    class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label,
    preserveAspectRatio: "xMidYMid meet",
  });
  chart.append(svg("title", { text: label }));

  const axis = svg("g", { class: "axis" });
  const baseline = top + plotHeight;
  axis.append(svg("line", { x1: left, x2: width - right, y1: baseline, y2: baseline, class: "axis-line" }));
  axis.append(svg("text", { x: left - 8, y: baseline, class: "y-label", "text-anchor": "end",
    "dominant-baseline": "middle", text: "0" }));
  if (max > 0) {
    axis.append(svg("line", { x1: left, x2: width - right, y1: top, y2: top, class: "grid-line" }));
    axis.append(svg("text", { x: left - 8, y: top, class: "y-label", "text-anchor": "end",
      "dominant-baseline": "middle", text: maxLabel }));
  }
  axis.append(svg("text", { x: 14, y: top + plotHeight / 2, class: "y-title", "text-anchor": "middle",
    transform: `rotate(-90 14 ${top + plotHeight / 2})`, text: "INR" }));
  const slot = days.length ? plotWidth / days.length : plotWidth;
  const labelled = new Set(width < 480 ? [0, days.length - 1] : [0, Math.floor((days.length - 1) / 2), days.length - 1]);
  days.forEach((day, index) => {
    if (!labelled.has(index)) return;
    const first = index === 0, last = index === days.length - 1 && index > 0;
    const x = first ? left : last ? left + slot * days.length : left + slot * index + slot / 2;
    const anchor = first ? "start" : last ? "end" : "middle";
    axis.append(svg("text", { x, y: height - 8, class: "x-label", "text-anchor": anchor, text: formatDay(day.date) }));
  });
  chart.append(axis);

  const bars = svg("g", { class: "bars" });
  days.forEach((day, index) => {
    const value = values[index];
    const barHeight = max > 0 ? Math.max(value > 0 ? 1.5 : 0, (value / max) * plotHeight) : 0;
    const x = left + slot * index;
    const gap = Math.min(4, slot * 0.2);
    const group = svg("g", { class: "day", dataset: { date: day.date } });
    group.append(
      svg("title", { text: `${day.date}: ${text(day.spend_inr, "0")} INR · ${text(day.requests, "0")} requests`
        + ` · ${text(day.errors, "0")} errors · ${text(day.cost_usd, "0")} USD` }),
      svg("rect", { class: "hit", x, y: top, width: slot, height: plotHeight }),
      svg("rect", { class: "bar", x: x + gap / 2, y: baseline - barHeight, width: Math.max(1, slot - gap),
        height: barHeight, rx: 2 }));
    bars.append(group);
  });
  chart.append(bars);
  if (max === 0) {
    chart.append(svg("text", { x: left + plotWidth / 2, y: top + plotHeight / 2, class: "chart-empty",
      "text-anchor": "middle", text: "No spend in this period" }));
  }
  return chart;
}
