// Requests: the org's request log, newest first, with filters, cursor pages and a details dialog.

import { api } from "./api.js";
import { byId, fillSelect, h, isoTime, setError, text, timeElement } from "./dom.js";

export function createRequests(app) {
  const table = byId("log-table");
  const filters = { route: byId("filter-route"), model: byId("filter-model"), status: byId("filter-status") };
  const pageSize = byId("page-size");
  const newer = byId("page-newer");
  const older = byId("page-older");
  // cursors[i] is the `before` of page i (null for the first); the last entry is the page shown.
  let cursors = [null];
  let nextCursor = null;
  let loading = 0;

  for (const select of [...Object.values(filters), pageSize]) {
    select.addEventListener("change", () => {
      cursors = [null];
      loadPage();
    });
  }
  byId("log-filters").addEventListener("submit", (event) => event.preventDefault());
  byId("requests-refresh").addEventListener("click", () => load());
  older.addEventListener("click", () => {
    if (!nextCursor) return;
    cursors.push(nextCursor);
    loadPage();
  });
  newer.addEventListener("click", () => {
    if (cursors.length < 2) return;
    cursors.pop();
    loadPage();
  });
  table.tBodies[0].addEventListener("click", (event) => {
    const row = event.target.closest("tr[data-id]");
    if (row) openDetails(app, row.dataset.id);
  });

  /** Refills the filter choices from /v1/usage, then reloads the page in view. */
  async function load() {
    const epoch = app.epoch;
    try {
      const usage = await api("/v1/usage?days=90");
      if (epoch !== app.epoch) return;
      app.setUsage(usage);
      let kept = fillSelect(filters.route, usage.routes ?? []);
      kept = fillSelect(filters.model, usage.models ?? []) && kept;
      kept = fillSelect(filters.status, usage.statuses ?? []) && kept;
      if (!kept) cursors = [null];
    } catch (error) {
      if (epoch !== app.epoch) return;
      setError(byId("requests-error"), `Could not load the filters: ${error.message}`);
    }
    await loadPage();
  }

  async function loadPage() {
    const epoch = app.epoch;
    const ticket = ++loading;
    const params = new URLSearchParams({ limit: pageSize.value });
    const before = cursors[cursors.length - 1];
    if (before) params.set("before", before);
    for (const [name, select] of Object.entries(filters)) {
      if (select.value !== "") params.set(name, select.value);
    }
    table.setAttribute("aria-busy", "true");
    newer.disabled = older.disabled = true;
    let page;
    try {
      page = await api(`/v1/logs?${params}`);
    } catch (error) {
      if (epoch !== app.epoch || ticket !== loading) return;
      table.removeAttribute("aria-busy");
      setError(byId("requests-error"), `Could not load requests: ${error.message}`);
      newer.disabled = cursors.length < 2;
      return;
    }
    if (epoch !== app.epoch || ticket !== loading) return;
    setError(byId("requests-error"), "");
    table.removeAttribute("aria-busy");
    const rows = page.data ?? [];
    table.tBodies[0].replaceChildren(...rows.map(logRow));
    byId("log-empty").hidden = rows.length > 0;
    nextCursor = page.has_more ? page.next_cursor : null;
    older.disabled = !nextCursor;
    newer.disabled = cursors.length < 2;
    byId("page-info").textContent = `Page ${cursors.length}` + (rows.length ? ` · ${rows.length} ${rows.length === 1 ? "row" : "rows"}` : "");
  }

  /** Forgets the rows, filters and pages shown (on sign-out). */
  function reset() {
    loading += 1;
    cursors = [null];
    nextCursor = null;
    table.tBodies[0].replaceChildren();
    for (const select of Object.values(filters)) fillSelect(select, []);
    byId("log-empty").hidden = true;
    byId("page-info").textContent = "";
    newer.disabled = older.disabled = true;
    setError(byId("requests-error"), "");
  }

  return { load, reset };
}

function tokens(usage) {
  if (!usage || (usage.prompt_tokens === undefined && usage.completion_tokens === undefined)) return "—";
  return `${text(usage.prompt_tokens, "0")}/${text(usage.completion_tokens, "0")}`;
}

function statusCell(entry) {
  const ok = entry.status >= 200 && entry.status < 300;
  return h("td", { class: "n", "data-col": "status" },
    h("span", { class: `badge ${ok ? "ok" : "bad"}`, text: text(entry.status) }));
}

function logRow(entry) {
  return h("tr", { dataset: { id: entry.id }, class: "clickable" },
    h("td", { "data-col": "id" },
      h("button", { type: "button", class: "link mono", title: "Show details", text: entry.id })),
    h("td", { "data-col": "time" }, timeElement(entry.created)),
    h("td", { "data-col": "route", class: "mono", text: text(entry.route) }),
    h("td", { "data-col": "model", text: text(entry.model) }),
    h("td", { "data-col": "provider", text: text(entry.provider) }),
    statusCell(entry),
    h("td", { class: "n", "data-col": "tokens", text: tokens(entry.usage) }),
    h("td", { class: "n", "data-col": "cost_usd", text: text(entry.cost_usd) }),
    h("td", { class: "n", "data-col": "cost_inr", text: text(entry.charged_inr) }),
    h("td", { class: "n", "data-col": "rate", text: entry.usd_to_inr == null ? "—" : `@ ${entry.usd_to_inr}` }),
    h("td", { class: "n", "data-col": "latency_ms", text: text(entry.latency_ms) }));
}

// -- details -------------------------------------------------------------------------------------

const dialog = () => byId("details");

let detailsWired = false;

function wireDetails() {
  if (detailsWired) return;
  detailsWired = true;
  byId("details-close").addEventListener("click", () => dialog().close());
  dialog().addEventListener("click", (event) => {
    if (event.target === dialog()) dialog().close(); // a click on the backdrop
  });
}

async function openDetails(app, id) {
  wireDetails();
  const epoch = app.epoch;
  byId("details-title").textContent = `Request ${id}`;
  byId("details-fields").replaceChildren();
  byId("details-content").replaceChildren(h("p", { class: "muted", text: "Loading…" }));
  setError(byId("details-error"), "");
  if (!dialog().open) dialog().showModal();
  let entry;
  try {
    entry = await api(`/v1/logs/${encodeURIComponent(id)}`);
  } catch (error) {
    if (epoch !== app.epoch) return;
    byId("details-content").replaceChildren();
    setError(byId("details-error"), `Could not load request ${id}: ${error.message}`);
    return;
  }
  if (epoch !== app.epoch) return;
  byId("details-fields").replaceChildren(...fields(entry));
  byId("details-content").replaceChildren(...content(entry));
}

function fields(entry) {
  const usage = entry.usage ?? {};
  const pairs = [
    ["Request ID", entry.id],
    ["Log ID", entry.log_id],
    ["Time", [timeElement(entry.created), h("span", { class: "muted", text: ` (${entry.created_at ?? isoTime(entry.created)})` })]],
    ["Route", entry.route],
    ["Model", entry.model],
    ["Provider", entry.provider],
    ["Status", String(entry.status)],
    ["Stream", entry.stream ? "yes" : "no"],
    ["Key", entry.key_id],
    ["Prompt tokens", usage.prompt_tokens],
    ["Completion tokens", usage.completion_tokens],
    ["Total tokens", usage.total_tokens],
    ["Cost USD", entry.cost_usd],
    ["Cost INR (at the rate)", entry.cost_inr],
    ["Charged INR", entry.charged_inr],
    ["Rate (INR per USD)", entry.usd_to_inr],
    ["Latency ms", entry.latency_ms],
    ["Error", entry.error ?? "none"],
  ];
  if (entry.anomaly) pairs.push(["Anomaly", entry.anomaly]);
  if ((entry.attempts ?? []).length > 0) pairs.push(["Attempts", attemptList(entry.attempts)]);
  for (const [name, value] of Object.entries(usage)) {
    if (!["prompt_tokens", "completion_tokens", "total_tokens"].includes(name)) {
      pairs.push([`Usage: ${name}`, typeof value === "object" ? JSON.stringify(value) : value]);
    }
  }
  return pairs.flatMap(([name, value]) => [
    h("dt", { text: name }),
    h("dd", { dataset: { field: name } }, value instanceof Node || Array.isArray(value) ? value : text(value)),
  ]);
}

/** Every provider the request tried, in order: provider, status, time, and why it failed. */
function attemptList(attempts) {
  return h("ol", { class: "attempts" }, ...attempts.map((attempt) => h("li", {
    dataset: { provider: attempt.provider, status: String(attempt.status) },
    text: `${attempt.provider}: ${attempt.status}, ${attempt.latency_ms} ms${attempt.error ? ` (${attempt.error})` : ""}`,
  })));
}

function content(entry) {
  if (entry.content_state === "removed") return [h("p", { class: "note", text: "Removed by retention" })];
  if (entry.content_state === "not_retained") return [h("p", { class: "note", text: "Not retained" })];
  if (!entry.content) return [h("p", { class: "note", text: "No content" })];
  return [
    h("h4", { text: "Request" }), h("div", { class: "content-request" }, renderValue(entry.content.request)),
    h("h4", { text: "Response" }), h("div", { class: "content-response" }, renderValue(entry.content.response)),
  ];
}

/** Content as text: chat messages as "role" + text blocks, strings as-is, anything else as JSON. */
function renderValue(value) {
  if (value === null || value === undefined) return h("p", { class: "muted", text: "None" });
  if (typeof value === "string") return h("pre", { class: "text", text: value });
  if (Array.isArray(value) && value.every(isMessage)) {
    return value.map((message) => h("div", { class: "message" },
      h("span", { class: "role", text: message.role }),
      h("pre", { class: "text", text: typeof message.content === "string"
        ? message.content : JSON.stringify(message.content, null, 2) })));
  }
  if (Array.isArray(value) && value.every((item) => typeof item === "string")) {
    return value.map((item) => h("pre", { class: "text", text: item }));
  }
  return h("pre", { class: "text", text: JSON.stringify(value, null, 2) });
}

function isMessage(item) {
  return item !== null && typeof item === "object" && typeof item.role === "string" && "content" in item;
}
