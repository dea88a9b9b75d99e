// The dashboard: sign-in, navigation between sections, sign-out on 401.

import { api, onUnauthorized, session } from "./api.js";
import { createBatches } from "./batches.js";
import { announce, byId, setError } from "./dom.js";
import { createDownloads } from "./downloads.js";
import { createKeys } from "./keys.js";
import { createMusic } from "./music.js";
import { createOverview } from "./overview.js";
import { createRequests } from "./requests.js";
import { createWebhooks } from "./webhooks.js";

const SECTIONS = ["overview", "requests", "music", "batches", "keys", "webhooks"];

const app = {
  // Bumped on every sign-in and sign-out: an answer arriving for an older epoch is dropped.
  epoch: 0,
  usage: null,
  setUsage(usage) {
    this.usage = usage;
    byId("org-name").textContent = usage.org_name ? `${usage.org_name} · ${usage.org_id}` : usage.org_id ?? "";
  },
};

const downloads = createDownloads(app);

const sections = {
  overview: createOverview(app),
  requests: createRequests(app),
  music: createMusic(app),
  batches: createBatches(app),
  keys: createKeys(app),
  webhooks: createWebhooks(app),
};

let current = null;

function showSection(name, { reload = true } = {}) {
  if (!SECTIONS.includes(name)) name = "overview";
  current = name;
  for (const id of SECTIONS) byId(id).hidden = id !== name;
  for (const button of document.querySelectorAll("nav.tabs button")) {
    if (button.dataset.section === name) button.setAttribute("aria-current", "page");
    else button.removeAttribute("aria-current");
  }
  // The URL holds only the section name, never the key.
  if (location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
  if (reload) sections[name].load();
}

function showSignedIn() {
  byId("signin-view").hidden = true;
  byId("app-view").hidden = false;
  byId("account").hidden = false;
  showSection(location.hash.slice(1) || "overview");
  sections.webhooks.check(); // a disabled endpoint shows on its tab whatever section is open
  if (!app.usage) {
    // The org's name for the header; it also checks a key kept from before a reload (401 signs out).
    const epoch = app.epoch;
    api("/v1/usage?days=1").then((usage) => {
      if (epoch === app.epoch && !app.usage) app.setUsage(usage);
    }, () => {});
  }
}

function signOut(message) {
  app.epoch += 1;
  app.usage = null;
  session.clear();
  const details = byId("details");
  if (details.open) details.close();
  for (const section of Object.values(sections)) section.reset();
  downloads.reset();
  byId("app-view").hidden = true;
  byId("account").hidden = true;
  byId("org-name").textContent = "";
  byId("signin-view").hidden = false;
  const input = byId("api-key");
  input.value = "";
  setError(byId("signin-error"), message && message.error ? message.text : "");
  announce(message ? message.text : "", { error: Boolean(message?.error) });
  input.focus();
}

async function signIn(event) {
  event.preventDefault();
  const input = byId("api-key");
  const button = byId("sign-in");
  const key = input.value.trim();
  setError(byId("signin-error"), "");
  if (!key) {
    setError(byId("signin-error"), "Enter an API key.");
    input.focus();
    return;
  }
  button.disabled = true;
  try {
    // Checks the key: a rejected key is 401, and nothing is stored.
    const usage = await api("/v1/usage?days=30", { key, signOutOn401: false });
    session.key = key;
    input.value = "";
    app.epoch += 1;
    app.setUsage(usage);
    announce("Signed in.");
    showSignedIn();
  } catch (error) {
    const message = error.status === 401
      ? "This API key was not accepted (401): it is unknown or revoked."
      : `Could not sign in: ${error.message}`;
    setError(byId("signin-error"), message);
    announce(message, { error: true });
    input.select();
  } finally {
    button.disabled = false;
  }
}

onUnauthorized(() => {
  if (!session.key) return;
  signOut({ text: "Your API key was rejected (401): you have been signed out.", error: true });
});

byId("signin-form").addEventListener("submit", signIn);
byId("sign-out").addEventListener("click", () => signOut({ text: "Signed out." }));
for (const button of document.querySelectorAll("nav.tabs button")) {
  button.addEventListener("click", () => showSection(button.dataset.section));
}

if (session.key) {
  app.epoch += 1;
  showSignedIn();
} else {
  byId("signin-view").hidden = false;
  byId("api-key").focus();
}
