// Batches: the org's batches of both APIs (GET /v1/dashboard/batches), newest first, with their
// progress, cost so far and the files they wrote. A file is fetched with the session key from
// GET /v1/files/{id}/content and saved from a Blob (downloads.js): a plain link could not send the key.

import { api } from "./api.js";
import { byId, h, setError, text, timeElement } from "./dom.js";
import { fetched, save } from "./downloads.js";

const PAGE_SIZE = 50;
const REFRESH_MS = 3000;  // while a batch shown still runs
const RUNNING = new Set(["in_progress", "cancelling"]);
const BADGES = { completed: "ok", failed: "bad", expired: "muted-badge", cancelled: "muted-badge" };

export function createBatches(app) {
  const table = byId("batches-table");
  const more = byId("batches-more");
  let nextCursor = null;
  let loading = 0;
  let timer = 0;

  byId("batches-refresh").addEventListener("click", () => load());
  more.addEventListener("click", () => loadPage(nextCursor));
  table.tBodies[0].addEventListener("click", (event) => {
    const button = event.target.closest("button[data-file]");
    if (button) download(button);
  });

  async function load() {
    await loadPage(null);
  }

  /** The first page (replacing the rows), or the page after `before` (appended). */
  async function loadPage(before) {
    const epoch = app.epoch;
    const ticket = ++loading;
    const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (before) params.set("before", before);
    table.setAttribute("aria-busy", "true");
    let page;
    try {
      page = await api(`/v1/dashboard/batches?${params}`);
    } catch (error) {
      if (epoch !== app.epoch || ticket !== loading) return;
      table.removeAttribute("aria-busy");
      setError(byId("batches-error"), `Could not load the batches: ${error.message}`);
      return;
    }
    if (epoch !== app.epoch || ticket !== loading) return;
    setError(byId("batches-error"), "");
    table.removeAttribute("aria-busy");
    const rows = (page.data ?? []).map(batchRow);
    if (before) table.tBodies[0].append(...rows);
    else table.tBodies[0].replaceChildren(...rows);
    byId("batches-empty").hidden = table.tBodies[0].rows.length > 0;
    nextCursor = page.has_more ? page.next_cursor : null;
    more.hidden = !nextCursor;
    refreshWhileRunning(page.data ?? [], before);
  }

  /** Reloads the first page in a while if a batch on it still runs and the section is open. */
  function refreshWhileRunning(batches, before) {
    clearTimeout(timer);
    if (before || !batches.some((batch) => RUNNING.has(batch.status))) return;
    timer = setTimeout(() => {
      if (!byId("batches").hidden) load();
    }, REFRESH_MS);
  }

  async function download(button) {
    const epoch = app.epoch;
    setError(byId("batches-error"), "");
    button.disabled = true;
    try {
      const blob = await fetched(`/v1/files/${encodeURIComponent(button.dataset.file)}/content`, "application/jsonl");
      if (epoch === app.epoch) save(blob, button.dataset.name);
    } catch (error) {
      if (epoch === app.epoch) setError(byId("batches-error"), `Could not download the file: ${error.message}`);
    } finally {
      button.disabled = false;
    }
  }

  /** Forgets the rows shown (on sign-out). */
  function reset() {
    loading += 1;
    clearTimeout(timer);
    nextCursor = null;
    table.tBodies[0].replaceChildren();
    byId("batches-empty").hidden = true;
    more.hidden = true;
    setError(byId("batches-error"), "");
  }

  return { load, reset };
}

function batchRow(batch) {
  return h("tr", { dataset: { id: batch.id, status: batch.status } },
    h("td", { "data-col": "id" }, h("span", { class: "mono", text: batch.id }),
      h("div", { class: "muted small", text: `${batch.api === "anthropic" ? "Message Batches" : "Batch API"} · ${batch.endpoint}` })),
    h("td", { "data-col": "model", text: text(batch.model) }),
    h("td", { "data-col": "status" }, h("span", { class: `badge ${BADGES[batch.status] ?? ""}`, text: batch.status.replace("_", " ") })),
    progressCell(batch.request_counts ?? {}),
    h("td", { class: "n", "data-col": "cost", text: text(batch.cost_inr, "0") }),
    h("td", { "data-col": "created" }, timeElement(batch.created_at)),
    h("td", { "data-col": "ended" }, timeElement(batch.ended_at)),
    h("td", { "data-col": "files" }, fileButtons(batch)));
}

function progressCell(counts) {
  const total = counts.total ?? 0;
  const done = (counts.completed ?? 0) + (counts.failed ?? 0);
  const label = `${counts.completed ?? 0} succeeded · ${counts.failed ?? 0} failed of ${total}`;
  return h("td", { "data-col": "progress" },
    h("progress", { max: String(Math.max(total, 1)), value: String(done), "aria-label": label }),
    h("div", { class: "small", text: label }));
}

function fileButtons(batch) {
  // An Anthropic batch has one results file; an OpenAI batch an output file and an error file.
  const files = [[batch.output_file_id, batch.api === "anthropic" ? "Results" : "Output", batch.api === "anthropic" ? "results" : "output"],
    [batch.error_file_id, "Errors", "errors"]].filter(([id]) => id);
  if (!files.length) return "—";
  return files.map(([id, label, kind]) => h("button", {
    type: "button", class: "secondary small", text: label, "aria-label": `Download ${label.toLowerCase()} of ${batch.id}`,
    dataset: { file: id, name: `${batch.id}_${kind}.jsonl` },
  }));
}
