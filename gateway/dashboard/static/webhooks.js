// Webhooks: the org's alert endpoints (admin keys), their recent deliveries and failures, a test
// delivery, and an endpoint the gateway disabled after a day of failures, said at the top and on
// the tab until an admin enables it again.

import { api } from "./api.js";
import { announce, byId, h, setError, text, timeElement } from "./dom.js";

// A queued test is delivered within the gateway's next look (about a second): its deliveries are
// looked at this often, for at most this long, until the test's attempt shows.
const TEST_POLL_MS = 400;
const TEST_WAIT_MS = 10_000;

export function createWebhooks(app) {
  const form = byId("webhook-form");
  const createButton = byId("webhook-create");
  let shown = null; // the id of the endpoint whose deliveries are listed

  byId("webhooks-refresh").addEventListener("click", () => load());
  byId("new-webhook-copy").addEventListener("click", copySecret);
  byId("new-webhook-dismiss").addEventListener("click", hideSecret);
  byId("webhook-deliveries-close").addEventListener("click", hideDeliveries);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    create();
  });

  async function load() {
    const epoch = app.epoch;
    let listed;
    try {
      listed = await api("/v1/webhooks");
    } catch (error) {
      if (epoch !== app.epoch) return;
      if (error.status === 403) return readOnly();
      setError(byId("webhooks-error"), `Could not load the webhooks: ${error.message}`);
      return;
    }
    if (epoch !== app.epoch) return;
    setError(byId("webhooks-error"), "");
    form.hidden = false;
    byId("webhooks-readonly").hidden = true;
    const endpoints = listed.data ?? [];
    if (shown && !endpoints.some((endpoint) => endpoint.id === shown)) hideDeliveries();
    byId("webhooks-table").tBodies[0].replaceChildren(...endpoints.map(row));
    byId("webhooks-empty").hidden = endpoints.length > 0;
    tellDisabled(endpoints);
    if (shown) await deliveries(shown);
  }

  /** Whether any endpoint is disabled, for the tab's badge at sign-in (quietly: non-admins see none). */
  async function check() {
    const epoch = app.epoch;
    try {
      const listed = await api("/v1/webhooks");
      if (epoch === app.epoch) tellDisabled(listed.data ?? []);
    } catch {
      // not an admin key, or not reachable now: the section says so when opened
    }
  }

  function readOnly() {
    form.hidden = true;
    byId("webhooks-readonly").hidden = false;
    byId("webhooks-empty").hidden = true;
    byId("webhooks-table").tBodies[0].replaceChildren();
    hideDeliveries();
    tellDisabled([]);
  }

  /** The banner at the top of the section and the badge on its tab: one line per disabled endpoint. */
  function tellDisabled(endpoints) {
    const disabled = endpoints.filter((endpoint) => !endpoint.enabled);
    const banner = byId("webhooks-disabled");
    banner.replaceChildren(...disabled.map((endpoint) => h("p", { dataset: { id: endpoint.id } },
      h("strong", { text: "Webhook disabled: " }), h("span", { class: "mono", text: endpoint.url }),
      ` — ${text(endpoint.disabled_reason, "disabled")}. `,
      "Nothing is delivered to it until it is enabled again (“Enable again” below).")));
    banner.hidden = disabled.length === 0;
    const badge = byId("webhooks-badge");
    badge.hidden = disabled.length === 0;
    badge.textContent = String(disabled.length);
    badge.title = disabled.length ? `${disabled.length} webhook endpoint(s) disabled` : "";
  }

  function row(endpoint) {
    const classes = [endpoint.enabled ? "" : "revoked", endpoint.id === shown ? "selected" : ""].join(" ").trim();
    return h("tr", { dataset: { id: endpoint.id }, class: classes, "aria-current": endpoint.id === shown ? "true" : null },
      h("td", { "data-col": "url", class: "mono url", text: endpoint.url }),
      h("td", { "data-col": "events", class: "models", text: eventsText(endpoint) }),
      h("td", { "data-col": "state", class: "state" }, state(endpoint)),
      h("td", { "data-col": "created" }, timeElement(endpoint.created)),
      h("td", { class: "row-actions" }, actions(endpoint)));
  }

  /** The state badge, and for a failing (or disabled) endpoint how it fails and when it is tried next. */
  function state(endpoint) {
    if (!endpoint.enabled) {
      return [h("span", { class: "badge bad", text: "disabled" }),
        h("div", { class: "state-note", "data-col": "reason", text: text(endpoint.disabled_reason, "") })];
    }
    if (endpoint.failed_attempts || endpoint.failing_since) {
      const note = h("div", { class: "state-note", "data-col": "failing" },
        `${endpoint.failed_attempts} failed ${endpoint.failed_attempts === 1 ? "attempt" : "attempts"}`);
      if (endpoint.failing_since) note.append(" since ", timeElement(endpoint.failing_since));
      if (endpoint.next_attempt_at) note.append("; next try ", timeElement(endpoint.next_attempt_at));
      return [h("span", { class: "badge bad", text: "failing" }), note];
    }
    return h("span", { class: "badge ok", text: "delivering" });
  }

  function actions(endpoint) {
    const wrap = h("div", { class: "revoke" });
    const button = (label, act, kind = "secondary") => h("button", { type: "button", class: kind, text: label,
      "aria-label": `${label}: ${endpoint.url}`, on: { click: (event) => act(event, endpoint) } });
    wrap.append(button("Deliveries", () => deliveries(endpoint.id)), button("Send test", sendTest));
    if (!endpoint.enabled) wrap.append(button("Enable again", enable, null));
    wrap.append(removeControls(endpoint));
    return wrap;
  }

  /** Lists the endpoint's latest delivery attempts (newest first) below the table. */
  async function deliveries(id) {
    const epoch = app.epoch;
    let endpoint;
    try {
      endpoint = await api(`/v1/webhooks/${encodeURIComponent(id)}`);
    } catch (error) {
      if (epoch !== app.epoch) return null;
      if (error.status === 404) {
        if (shown === id) hideDeliveries();
        return null;
      }
      setError(byId("webhooks-error"), `Could not load the deliveries: ${error.message}`);
      return null;
    }
    if (epoch !== app.epoch) return null;
    shown = id;
    for (const tr of byId("webhooks-table").tBodies[0].rows) {
      const selected = tr.dataset.id === id;
      tr.classList.toggle("selected", selected);
      if (selected) tr.setAttribute("aria-current", "true");
      else tr.removeAttribute("aria-current");
    }
    byId("webhook-deliveries-url").textContent = endpoint.url;
    const rows = (endpoint.deliveries ?? []).map(deliveryRow);
    byId("deliveries-table").tBodies[0].replaceChildren(...rows);
    byId("deliveries-empty").hidden = rows.length > 0;
    byId("webhook-deliveries").hidden = false;
    return endpoint;
  }

  function hideDeliveries() {
    shown = null;
    byId("webhook-deliveries").hidden = true;
    byId("deliveries-table").tBodies[0].replaceChildren();
    for (const tr of byId("webhooks-table").tBodies[0].rows) {
      tr.classList.remove("selected");
      tr.removeAttribute("aria-current");
    }
  }

  function deliveryRow(delivery) {
    return h("tr", { dataset: { message: delivery.message_id }, class: delivery.delivered ? "" : "failed" },
      h("td", { "data-col": "at" }, timeElement(delivery.at)),
      h("td", { "data-col": "type", text: delivery.type }),
      h("td", { "data-col": "message", class: "mono", text: delivery.message_id }),
      h("td", { "data-col": "attempt", class: "n", text: String(delivery.attempt) }),
      h("td", { "data-col": "status", class: "n", text: delivery.status ? String(delivery.status) : "no answer" }),
      h("td", { "data-col": "latency", class: "n", text: text(delivery.latency_ms) }),
      h("td", { "data-col": "result", class: "result" }, delivery.delivered
        ? h("span", { class: "badge ok", text: "delivered" })
        : [h("span", { class: "badge bad", text: "failed" }),
          h("span", { class: "delivery-error", "data-col": "error", text: text(delivery.error, "") })]));
  }

  /** Runs one change (its button disabled meanwhile), then lists the endpoints again; errors go to the error line. */
  async function act(what, button, run) {
    const epoch = app.epoch;
    setError(byId("webhooks-error"), "");
    if (button) button.disabled = true;
    try {
      await run(epoch);
      if (epoch === app.epoch) await load();
    } catch (error) {
      if (epoch === app.epoch) setError(byId("webhooks-error"), `Could not ${what}: ${error.message}`);
    } finally {
      if (button) button.disabled = false;
    }
  }

  function sendTest(event, endpoint) {
    return act("send a test", event.currentTarget, async (epoch) => {
      const path = `/v1/webhooks/${encodeURIComponent(endpoint.id)}`;
      const queued = await api(`${path}/test`, { method: "POST" });
      if (epoch !== app.epoch) return;
      if (!queued.enabled) {
        announce(`Test queued for ${endpoint.url}: it is delivered once the endpoint is enabled again.`);
        await deliveries(endpoint.id);
        return;
      }
      announce(`Test ${queued.id} queued for ${endpoint.url}.`);
      const deadline = Date.now() + TEST_WAIT_MS;
      while (epoch === app.epoch && Date.now() < deadline) {
        const seen = await deliveries(endpoint.id);
        if (!seen || seen.deliveries.some((delivery) => delivery.message_id === queued.id)) break;
        await new Promise((resolve) => setTimeout(resolve, TEST_POLL_MS));
      }
    });
  }

  function enable(event, endpoint) {
    return act("enable the endpoint", event.currentTarget, async () => {
      await api(`/v1/webhooks/${encodeURIComponent(endpoint.id)}`, { method: "PATCH", body: { enabled: true } });
      announce(`Delivering to ${endpoint.url} again.`);
    });
  }

  /** "Remove" asks for a second click ("Confirm remove" / "Cancel") before it acts, as revoking a key does. */
  function removeControls(endpoint) {
    const wrap = h("span", { class: "revoke" });
    const first = () => h("button", { type: "button", class: "danger-outline", text: "Remove",
      "aria-label": `Remove: ${endpoint.url}`, on: { click: ask } });
    function ask() {
      wrap.replaceChildren(
        h("button", { type: "button", class: "danger", text: "Confirm remove",
          "aria-label": `Confirm remove: ${endpoint.url}`, on: { click: confirm } }),
        h("button", { type: "button", class: "secondary", text: "Cancel", on: { click: cancel } }));
      wrap.querySelector("button").focus();
    }
    function cancel() {
      wrap.replaceChildren(first());
    }
    function confirm(event) {
      return act("remove the endpoint", event.currentTarget, async () => {
        try {
          await api(`/v1/webhooks/${encodeURIComponent(endpoint.id)}`, { method: "DELETE" });
        } catch (error) {
          cancel();
          throw error;
        }
        if (shown === endpoint.id) hideDeliveries();
        announce(`Removed ${endpoint.url}: nothing more is delivered to it.`);
      });
    }
    wrap.append(first());
    return wrap;
  }

  async function create() {
    const events = [...form.querySelectorAll("input[name=webhook-event]:checked")].map((box) => box.value);
    const body = { url: byId("webhook-url").value.trim(), events };
    const low = byId("webhook-low").value.trim();
    if (low) body.balance_low_inr = low;
    await act("add the endpoint", createButton, async (epoch) => {
      const created = await api("/v1/webhooks", { method: "POST", body });
      if (epoch !== app.epoch) return;
      byId("new-webhook-secret").value = created.secret;
      byId("new-webhook-url").textContent = created.url;
      byId("new-webhook").hidden = false;
      byId("webhook-url").value = "";
      byId("webhook-low").value = "";
      announce("Endpoint added. Copy its signing secret now: it will not be shown again.");
    });
  }

  function hideSecret() {
    byId("new-webhook-secret").value = "";
    byId("new-webhook-url").textContent = "";
    byId("new-webhook").hidden = true;
  }

  /** Forgets everything shown (on sign-out). */
  function reset() {
    hideSecret();
    hideDeliveries();
    form.reset();
    form.hidden = true;
    byId("webhooks-readonly").hidden = true;
    byId("webhooks-empty").hidden = true;
    byId("webhooks-table").tBodies[0].replaceChildren();
    tellDisabled([]);
    setError(byId("webhooks-error"), "");
  }

  return { load, reset, check };
}

/** "balance.low (below ₹50), key.budget (50/80/100%), credits.added": each alert with its threshold. */
function eventsText(endpoint) {
  return endpoint.events.map((event) => {
    if (event === "balance.low" && endpoint.balance_low_inr !== null && endpoint.balance_low_inr !== undefined) {
      return `${event} (below ₹${endpoint.balance_low_inr})`;
    }
    if (event === "key.budget" && endpoint.key_budget_percent?.length) {
      return `${event} (${endpoint.key_budget_percent.join("/")}%)`;
    }
    if (event === "key.expiring" && endpoint.key_expiring_hours) return `${event} (${endpoint.key_expiring_hours} h)`;
    return event;
  }).join(", ");
}

async function copySecret() {
  const input = byId("new-webhook-secret");
  try {
    await navigator.clipboard.writeText(input.value);
    announce("Signing secret copied to the clipboard.");
  } catch {
    input.focus();
    input.select();
    announce("Copying was not allowed: the secret is selected, press Ctrl+C (or ⌘C) to copy it.");
  }
}
