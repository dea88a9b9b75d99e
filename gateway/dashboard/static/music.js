// Music: generate a track (POST /v1/music) and the history with players for hosted tracks.

import { api, ApiError } from "./api.js";
import { announce, byId, h, setError, text, timeElement } from "./dom.js";

const LINK_CONCURRENCY = 4;

export function createMusic(app) {
  const form = byId("music-form");
  const button = byId("music-generate");
  const modelSelect = byId("music-model");
  let modelsLoaded = false;
  let blobUrls = [];
  let generating = false;

  byId("music-refresh").addEventListener("click", () => loadHistory());
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    generate();
  });

  async function loadModels() {
    if (modelsLoaded) return;
    try {
      const catalogue = await api("/v1/models");
      const music = (catalogue.data ?? []).filter((model) => {
        const price = model.pricing?.audio_music_per_generation;
        return price !== undefined && price !== null && Number(price) !== 0;
      });
      modelSelect.replaceChildren(...music.map((model) =>
        h("option", { value: model.id, text: model.name ? `${model.name} (${model.id})` : model.id })));
      modelsLoaded = music.length > 0;
      if (!music.length) setError(byId("music-error"), "No music model is available.");
    } catch (error) {
      setError(byId("music-error"), `Could not load the models: ${error.message}`);
    }
  }

  async function load() {
    await Promise.all([loadModels(), loadHistory()]);
  }

  async function loadHistory() {
    const epoch = app.epoch;
    const list = byId("music-history");
    list.setAttribute("aria-busy", "true");
    let history;
    try {
      history = await api("/v1/music?limit=100");
    } catch (error) {
      if (epoch !== app.epoch) return;
      list.removeAttribute("aria-busy");
      setError(byId("music-history-error"), `Could not load the history: ${error.message}`);
      return;
    }
    if (epoch !== app.epoch) return;
    setError(byId("music-history-error"), "");
    const tracks = history.data ?? [];
    const items = tracks.map((track) => trackItem(track));
    list.replaceChildren(...items.map((item) => item.element));
    byId("music-empty").hidden = tracks.length > 0;
    list.removeAttribute("aria-busy");
    // Signed links for hosted tracks, a few at a time.
    const queue = items.filter((item) => item.needsLink);
    const workers = Array.from({ length: Math.min(LINK_CONCURRENCY, queue.length) }, async () => {
      while (queue.length) {
        const item = queue.shift();
        await attachPlayer(item.media, item.track.id, epoch, app);
      }
    });
    await Promise.all(workers);
  }

  async function generate() {
    if (generating) return;
    const prompt = byId("music-prompt").value;
    setError(byId("music-error"), "");
    if (!prompt.trim()) {
      setError(byId("music-error"), "Write a prompt first.");
      byId("music-prompt").focus();
      return;
    }
    const body = {
      model: modelSelect.value,
      prompt,
      instrumental: byId("music-instrumental").checked,
    };
    const lyrics = byId("music-lyrics").value;
    if (lyrics.trim() && !body.instrumental) body.lyrics = lyrics;
    const epoch = app.epoch;
    generating = true;
    button.disabled = true;
    const progress = byId("music-progress");
    const elapsed = byId("music-elapsed");
    const started = performance.now();
    elapsed.textContent = "0 s";
    progress.hidden = false;
    const timer = setInterval(() => {
      elapsed.textContent = `${Math.floor((performance.now() - started) / 1000)} s`;
    }, 250);
    announce("Generating a track…");
    const result = byId("music-result");
    try {
      const track = await api("/v1/music", { method: "POST", body });
      if (epoch !== app.epoch) return;
      await showResult(track, result);
      announce(`Track ${track.id} generated.`);
      loadHistory();
    } catch (error) {
      if (epoch !== app.epoch) return;
      setError(byId("music-error"), error instanceof ApiError ? `Generation failed: ${error.message}` : String(error));
      announce("Generation failed.", { error: true });
    } finally {
      clearInterval(timer);
      progress.hidden = true;
      button.disabled = false;
      generating = false;
    }
  }

  async function showResult(track, result) {
    for (const url of blobUrls) URL.revokeObjectURL(url);
    blobUrls = [];
    const audio = track.audio ?? {};
    const media = h("div", { class: "media" });
    result.replaceChildren(
      h("p", {}, h("strong", { text: "New track " }), h("span", { class: "mono", text: track.id }),
        ` · ${text(track.usage?.cost_inr, "0")} INR`),
      media);
    result.hidden = false;
    if (audio.storage === "s3") {
      await attachPlayer(media, track.id, app.epoch, app);
    } else if (audio.base64) {
      const url = URL.createObjectURL(base64Blob(audio.base64, audio.mime_type || "audio/mpeg"));
      blobUrls.push(url);
      media.replaceChildren(player(url), h("a", { href: url, download: `${track.id}.mp3`, class: "button secondary", text: "Download" }),
        h("p", { class: "muted small", text: "Not hosted: this copy lives only in this page." }));
    } else {
      media.replaceChildren(h("p", { class: "note", text: "No audio was returned." }));
    }
  }

  /** Forgets the history and the last generated track (on sign-out). */
  function reset() {
    for (const url of blobUrls) URL.revokeObjectURL(url);
    blobUrls = [];
    byId("music-history").replaceChildren();
    byId("music-empty").hidden = true;
    byId("music-result").replaceChildren();
    byId("music-result").hidden = true;
    form.reset();
    setError(byId("music-error"), "");
    setError(byId("music-history-error"), "");
  }

  return { load, loadHistory, reset };
}

function base64Blob(data, type) {
  const binary = atob(data);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return new Blob([bytes], { type });
}

function player(src) {
  return h("audio", { controls: true, preload: "metadata", src });
}

/** Fetches the track's signed path and puts a player and a download link in `media`. */
async function attachPlayer(media, id, epoch, app) {
  media.replaceChildren(h("p", { class: "muted small", text: "Loading the player…" }));
  let link;
  try {
    link = await api(`/v1/music/${encodeURIComponent(id)}/link`);
  } catch (error) {
    if (epoch !== app.epoch) return;
    if (error instanceof ApiError && error.status === 410) {
      media.replaceChildren(expiredNote());
      media.closest(".track")?.querySelector(".badge")?.replaceWith(badge("Expired", "muted-badge"));
    } else {
      media.replaceChildren(h("p", { class: "error", text: `The audio link could not be loaded: ${error.message}` }));
    }
    return;
  }
  if (epoch !== app.epoch) return;
  media.replaceChildren(player(link.url),
    h("a", { href: link.url, download: `${id}.mp3`, class: "button secondary", text: "Download" }));
}

function badge(label, kind) {
  return h("span", { class: `badge ${kind}`, text: label });
}

function expiredNote() {
  return h("p", { class: "note", text: "Expired: the audio was deleted after the retention period." });
}

function trackItem(track) {
  const media = h("div", { class: "media" });
  const model = track.metadata?.used_model ?? track.model ?? "";
  let status;
  let needsLink = false;
  if (track.error) {
    status = badge("Failed", "bad");
    media.append(h("p", { class: "note", text: "Failed: the generation did not complete and nothing was charged." }));
  } else if (track.expired) {
    status = badge("Expired", "muted-badge");
    media.append(expiredNote());
  } else if (track.audio && track.audio.storage === "s3") {
    status = badge("Hosted", "ok");
    needsLink = true;
  } else {
    const storage = track.audio?.storage ?? "none";
    status = badge("Not hosted", "muted-badge");
    media.append(h("p", { class: "note", text: storage === "inline"
      ? "The audio was not hosted: it was returned inline with the response only."
      : "The audio was not hosted: this organization keeps no content." }));
  }
  const lyrics = track.text_removed
    ? h("p", { class: "note", text: "Lyrics removed by retention" })
    : track.text
      ? h("details", { class: "lyrics", open: true }, h("summary", { text: "Lyrics" }), h("pre", { class: "text", text: track.text }))
      : null;
  const element = h("article", { class: "card track", dataset: { id: track.id } },
    h("div", { class: "track-head" },
      h("h3", { class: "prompt", text: track.prompt || "(prompt not kept)" }),
      status),
    h("p", { class: "meta muted" },
      h("span", { class: "model", text: model }), " · ", timeElement(track.created), " · ",
      h("span", { class: "cost", text: `${text(track.usage?.cost_inr, "0")} INR` }), " · ",
      h("span", { class: "mono", text: track.id })),
    media, lyrics);
  return { element, media, track, needsLink };
}
