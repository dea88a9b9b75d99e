// Downloads: a month's statement (JSON, or its charges as CSV) and the org's ledger export
// (NDJSON, admin keys), fetched with the session key and saved as a file from a Blob: a plain
// link could not send the key, and the key never goes in a URL. Batches' files use the same two.

import { ApiError, session } from "./api.js";
import { byId, setError } from "./dom.js";

const KINDS = {
  "statement-json": { accept: "application/json", path: (month) => `/v1/statements/${month}`,
    name: (month) => `statement-${month}.json` },
  "statement-csv": { accept: "text/csv", path: (month) => `/v1/statements/${month}?format=csv`,
    name: (month) => `statement-${month}.csv` },
  "ledger-export": { accept: "application/x-ndjson", path: () => "/v1/ledger/events",
    name: () => "ledger-events.ndjson" },
};

/** This UTC month as YYYY-MM (the statements' months are UTC). */
export function utcMonth(date = new Date()) {
  return date.toISOString().slice(0, 7);
}

export function createDownloads(app) {
  const month = byId("statement-month");
  if (!month.value) month.value = utcMonth();
  for (const [id, kind] of Object.entries(KINDS)) {
    byId(id).addEventListener("click", () => download(kind, month.value));
  }

  async function download(kind, chosen) {
    const epoch = app.epoch;
    setError(byId("downloads-error"), "");
    if (!/^\d{4}-\d{2}$/.test(chosen)) {
      setError(byId("downloads-error"), "Choose a month first.");
      return;
    }
    try {
      const blob = await fetched(kind.path(chosen), kind.accept);
      if (epoch === app.epoch) save(blob, kind.name(chosen));
    } catch (error) {
      if (epoch === app.epoch) setError(byId("downloads-error"), `Could not download: ${error.message}`);
    }
  }

  return { reset: () => setError(byId("downloads-error"), "") };
}

/** The body at `path`, fetched with the session key; ApiError with the gateway's message if refused. */
export async function fetched(path, accept) {
  const headers = { Accept: accept, Authorization: `Bearer ${session.key}` };
  const response = await fetch(path, { headers, cache: "no-store", credentials: "omit", redirect: "error" });
  if (!response.ok) {
    let message = `HTTP ${response.status}`;
    try {
      message = (await response.json()).error.message ?? message;
    } catch {
      // not the gateway's JSON error body: the status says enough
    }
    throw new ApiError(response.status, message);
  }
  return response.blob();
}

/** Saves `blob` as a file named `name`, as a download link would. */
export function save(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);  // after the browser has taken the file
}
