// Keys: the org's API keys with their spend controls; admin keys may create (shown once) and revoke them.

import { api } from "./api.js";
import { announce, byId, h, isoTime, setError, text, timeElement } from "./dom.js";

export function createKeys(app) {
  const form = byId("key-form");
  const createButton = byId("key-create");
  let canManage = false;

  byId("keys-refresh").addEventListener("click", () => load());
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    create();
  });
  byId("new-key-copy").addEventListener("click", copyNewKey);
  byId("new-key-dismiss").addEventListener("click", hideNewKey);

  async function load() {
    const epoch = app.epoch;
    let keys;
    try {
      keys = await api("/v1/keys");
    } catch (error) {
      if (epoch === app.epoch) setError(byId("keys-error"), `Could not load the keys: ${error.message}`);
      return;
    }
    if (epoch !== app.epoch) return;
    setError(byId("keys-error"), "");
    canManage = Boolean(keys.can_manage);
    form.hidden = !canManage;
    byId("keys-readonly").hidden = canManage;
    const rows = (keys.data ?? []).map((key) => keyRow(key, keys.current_key_id));
    byId("keys-table").tBodies[0].replaceChildren(...rows);
  }

  async function create() {
    const name = byId("key-name").value.trim();
    const admin = byId("key-admin").checked;
    setError(byId("keys-error"), "");
    createButton.disabled = true;
    const epoch = app.epoch;
    try {
      const created = await api("/v1/keys", { method: "POST", body: { name, admin } });
      if (epoch !== app.epoch) return;
      byId("new-key-value").value = created.api_key;
      byId("new-key").hidden = false;
      byId("key-name").value = "";
      byId("key-admin").checked = false;
      announce(`Key ${created.prefix ?? created.id} created. Copy it now: it will not be shown again.`);
      await load();
    } catch (error) {
      if (epoch === app.epoch) setError(byId("keys-error"), `Could not create the key: ${error.message}`);
    } finally {
      createButton.disabled = false;
    }
  }

  function keyRow(key, currentId) {
    const current = key.id === currentId;
    const actions = h("td", { class: "row-actions" });
    if (canManage && !key.revoked && !current) actions.append(revokeControls(key));
    return h("tr", { dataset: { id: key.id }, class: key.revoked ? "revoked" : "" },
      h("td", { "data-col": "prefix", class: "mono", text: text(key.prefix) }),
      h("td", { "data-col": "name" }, text(key.name, ""),
        current ? h("span", { class: "badge ok", text: "this key" }) : null),
      h("td", { "data-col": "admin", text: key.admin ? "yes" : "no" }),
      h("td", { "data-col": "created" }, timeElement(key.created)),
      h("td", { "data-col": "last_used" }, key.last_used ? timeElement(key.last_used) : "never"),
      h("td", { "data-col": "revoked" }, key.revoked ? timeElement(key.revoked) : "no"),
      h("td", { "data-col": "budget", text: budgetText(key) }),
      h("td", { "data-col": "spent", class: "n", text: text(key.spent_inr, "0"), title: spentTitle(key) }),
      h("td", { "data-col": "reserved", class: "n", text: text(key.reserved_inr, "0") }),
      h("td", { "data-col": "escrow", class: "n", text: text(key.escrow_inr, "0") }),
      h("td", { "data-col": "models", class: "models", text: key.models?.length ? key.models.join(", ") : "all" }),
      h("td", { "data-col": "expires" }, key.expires_at ? utcTimeElement(key.expires_at) : "never"),
      actions);
  }

  /** "Revoke" asks for a second click ("Confirm revoke" / "Cancel") before it acts. */
  function revokeControls(key) {
    const wrap = h("div", { class: "revoke" });
    const label = key.name ? `${key.prefix} (${key.name})` : key.prefix;
    const first = () => h("button", { type: "button", class: "danger-outline", text: "Revoke",
      "aria-label": `Revoke ${label}`, on: { click: ask } });
    function ask() {
      wrap.replaceChildren(
        h("button", { type: "button", class: "danger", text: "Confirm revoke", on: { click: confirm } }),
        h("button", { type: "button", class: "secondary", text: "Cancel", on: { click: cancel } }));
      wrap.querySelector("button").focus();
    }
    function cancel() {
      wrap.replaceChildren(first());
    }
    async function confirm(event) {
      event.currentTarget.disabled = true;
      const epoch = app.epoch;
      try {
        await api(`/v1/keys/${encodeURIComponent(key.id)}`, { method: "DELETE" });
        if (epoch !== app.epoch) return;
        announce(`Key ${label} revoked.`);
        await load();
      } catch (error) {
        if (epoch !== app.epoch) return;
        setError(byId("keys-error"), `Could not revoke ${label}: ${error.message}`);
        cancel();
      }
    }
    wrap.append(first());
    return wrap;
  }

  /** Forgets the list and any key just created (on sign-out). */
  function reset() {
    hideNewKey();
    form.reset();
    form.hidden = true;
    byId("keys-readonly").hidden = true;
    byId("keys-table").tBodies[0].replaceChildren();
    setError(byId("keys-error"), "");
  }

  return { load, reset };
}

async function copyNewKey() {
  const input = byId("new-key-value");
  try {
    await navigator.clipboard.writeText(input.value);
    announce("Key copied to the clipboard.");
  } catch {
    input.focus();
    input.select();
    announce("Copying was not allowed: the key is selected, press Ctrl+C (or ⌘C) to copy it.");
  }
}

/** "₹10 / day", "₹10 / month", "₹10 in total"; "—" without a budget. */
function budgetText(key) {
  if (key.budget_inr === null || key.budget_inr === undefined) return "—";
  return key.budget_period === "day" || key.budget_period === "month"
    ? `₹${key.budget_inr} / ${key.budget_period}` : `₹${key.budget_inr} in total`;
}

/** What the Spent column counts, and when it starts again. */
function spentTitle(key) {
  const counted = key.budget_inr === null || key.budget_inr === undefined || key.budget_period === "total"
    ? "INR charged in total" : `INR charged this ${key.budget_period}`;
  return key.resets_at ? `${counted}; resets ${isoTime(key.resets_at)}` : counted;
}

/** A <time> element for Unix seconds, shown in UTC ("2030-01-01 00:00 UTC"). */
function utcTimeElement(seconds) {
  const iso = isoTime(seconds);
  return h("time", { datetime: iso, title: iso, text: `${iso.slice(0, 16).replace("T", " ")} UTC` });
}

function hideNewKey() {
  byId("new-key-value").value = "";
  byId("new-key").hidden = true;
}
