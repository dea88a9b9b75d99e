// Webhooks: the org's alert endpoints (admin keys), their recent deliveries and failures, a test
// delivery, and an endpoint the gateway disabled after a day of failures, said at the top and on
// the tab until an admin enables it again.

import { api } from "./api.js";
import { announce, byId, h, setError, text, timeElement } from "./dom.js";

const TEST_SETTLE_MS = 1500; // a queued test is delivered within the gateway's next look (about a second)

export function createWebhooks(app) {
  const form = byId("webhook-form");
  let shown = null; // the endpoint whose deliveries are listed

  byId("webhooks-refresh").addEventListener("click", () => load());
  byId("new-webhook-dismiss").addEventListener("click", hideSecret);
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
    byId("webhooks-table").tBodies[0].replaceChildren(...endpoints.map(row));
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
    byId("webhooks-table").tBodies[0].replaceChildren();
  }

  function tellDisabled(endpoints) {
    const disabled = endpoints.filter((endpoint) => !endpoint.enabled && endpoint.disabled_reason);
    const banner = byId("webhooks-disabled");
    banner.replaceChildren(...disabled.map((endpoint) => h("p", {},
      h("strong", { text: "Webhook disabled: " }), h("span", { class: "mono", text: endpoint.url }),
      ` — ${endpoint.disabled_reason}`)));
    banner.hidden = disabled.length === 0;
    const badge = byId("webhooks-badge");
    badge.hidden = disabled.length === 0;
    badge.textContent = String(disabled.length);
    badge.title = disabled.length ? `${disabled.length} webhook endpoint(s) disabled` : "";
  }

  function row(endpoint) {
    return h("tr", { dataset: { id: endpoint.id }, class: endpoint.enabled ? "" : "revoked" },
      h("td", { "data-col": "url", class: "mono", text: endpoint.url }),
      h("td", { "data-col": "events", class: "models", text: endpoint.events.join(", ") }),
      h("td", { "data-col": "state" }, state(endpoint)),
      h("td", { "data-col": "created" }, timeElement(endpoint.created)),
      h("td", { class: "row-actions" }, actions(endpoint)));
  }

  function state(endpoint) {
    if (!endpoint.enabled) return h("span", { class: "badge bad", text: "disabled", title: text(endpoint.disabled_reason) });
    if (endpoint.failed_attempts) {
      return h("span", { class: "badge bad", text: `failing (${endpoint.failed_attempts} tries)`,
        title: endpoint.next_attempt_at ? `next try ${new Date(endpoint.next_attempt_at * 1000).toISOString()}` : "" });
    }
    return h("span", { class: "badge ok", text: "delivering" });
  }

  function actions(endpoint) {
    const wrap = h("div", { class: "revoke" });
    const button = (label, act, kind = "secondary") => h("button", { type: "button", class: kind, text: label,
      "aria-label": `${label}: ${endpoint.url}`, on: { click: (event) => act(event, endpoint) } });
    wrap.append(button("Deliveries", (_, e) => deliveries(e.id)), button("Send test", sendTest));
    if (!endpoint.enabled) wrap.append(button("Enable again", enable));
    wrap.append(button("Remove", remove, "danger-outline"));
    return wrap;
  }

  async function deliveries(id) {
    const epoch = app.epoch;
    try {
      const endpoint = await api(`/v1/webhooks/${encodeURIComponent(id)}`);
      if (epoch !== app.epoch) return;
      shown = id;
      byId("webhook-deliveries-title").textContent = `Recent deliveries to ${endpoint.url}`;
      byId("deliveries-table").tBodies[0].replaceChildren(...endpoint.deliveries.map(deliveryRow));
      byId("webhook-deliveries").hidden = false;
    } catch (error) {
      if (epoch === app.epoch) setError(byId("webhooks-error"), `Could not load the deliveries: ${error.message}`);
    }
  }

  function deliveryRow(delivery) {
    return h("tr", { class: delivery.delivered ? "" : "revoked" },
      h("td", { "data-col": "at" }, timeElement(delivery.at)),
      h("td", { "data-col": "type", text: delivery.type }),
      h("td", { "data-col": "message", class: "mono", text: delivery.message_id }),
      h("td", { "data-col": "attempt", class: "n", text: String(delivery.attempt) }),
      h("td", { "data-col": "status", class: "n", text: delivery.status ? String(delivery.status) : "no answer" }),
      h("td", { "data-col": "result" }, delivery.delivered ? h("span", { class: "badge ok", text: "delivered" })
        : h("span", { class: "badge bad", text: text(delivery.error, "failed") })));
  }

  async function act(what, run) {
    const epoch = app.epoch;
    setError(byId("webhooks-error"), "");
    try {
      await run();
      if (epoch === app.epoch) await load();
    } catch (error) {
      if (epoch === app.epoch) setError(byId("webhooks-error"), `Could not ${what}: ${error.message}`);
    }
  }

  function sendTest(event, endpoint) {
    return act("send a test", async () => {
      const queued = await api(`/v1/webhooks/${encodeURIComponent(endpoint.id)}/test`, { method: "POST" });
      announce(`Test ${queued.id} queued for ${endpoint.url}.`);
      shown = endpoint.id;
      await new Promise((resolve) => setTimeout(resolve, TEST_SETTLE_MS));
    });
  }

  function enable(event, endpoint) {
    return act("enable the endpoint", async () => {
      await api(`/v1/webhooks/${encodeURIComponent(endpoint.id)}`, { method: "PATCH", body: { enabled: true } });
      announce(`Delivering to ${endpoint.url} again.`);
    });
  }

  function remove(event, endpoint) {
    if (!window.confirm(`Remove the webhook endpoint ${endpoint.url}? Nothing more is delivered to it.`)) return;
    return act("remove the endpoint", async () => {
      await api(`/v1/webhooks/${encodeURIComponent(endpoint.id)}`, { method: "DELETE" });
      if (shown === endpoint.id) {
        shown = null;
        byId("webhook-deliveries").hidden = true;
      }
      announce(`Removed ${endpoint.url}.`);
    });
  }

  async function create() {
    const events = [...form.querySelectorAll("input[name=webhook-event]:checked")].map((box) => box.value);
    const body = { url: byId("webhook-url").value.trim(), events };
    const low = byId("webhook-low").value.trim();
    if (low) body.balance_low_inr = low;
    await act("add the endpoint", async () => {
      const created = await api("/v1/webhooks", { method: "POST", body });
      byId("new-webhook-secret").value = created.secret;
      byId("new-webhook").hidden = false;
      byId("webhook-url").value = "";
      byId("webhook-low").value = "";
      announce("Endpoint added. Copy its signing secret now: it will not be shown again.");
    });
  }

  function hideSecret() {
    byId("new-webhook-secret").value = "";
    byId("new-webhook").hidden = true;
  }

  /** Forgets everything shown (on sign-out). */
  function reset() {
    hideSecret();
    shown = null;
    form.hidden = true;
    byId("webhooks-readonly").hidden = true;
    byId("webhooks-disabled").hidden = true;
    byId("webhooks-badge").hidden = true;
    byId("webhook-deliveries").hidden = true;
    byId("webhooks-table").tBodies[0].replaceChildren();
    setError(byId("webhooks-error"), "");
  }

  return { load, reset, check };
}
