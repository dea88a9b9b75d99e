// DOM helpers. Everything is built with createElement and textContent: data never becomes markup.

const SVG_NS = "http://www.w3.org/2000/svg";

function apply(element, attrs) {
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") element.textContent = String(value);
    else if (name === "class") element.setAttribute("class", value);
    else if (name === "dataset") Object.assign(element.dataset, value);
    else if (name === "on") for (const [type, handler] of Object.entries(value)) element.addEventListener(type, handler);
    else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, String(value));
  }
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** An HTML element: h("td", {class: "n", text: "12"}) or h("p", {}, "text ", h("code", {text: x})). */
export function h(tag, attrs = {}, ...children) {
  return append(apply(document.createElement(tag), attrs), children);
}

/** An SVG element (document.createElementNS). */
export function svg(tag, attrs = {}, ...children) {
  return append(apply(document.createElementNS(SVG_NS, tag), attrs), children);
}

export function byId(id) {
  const element = document.getElementById(id);
  if (!element) throw new Error(`missing element #${id}`);
  return element;
}

export function show(element, visible = true) {
  element.hidden = !visible;
}

/** Shows `message` in an error element (hidden when empty). */
export function setError(element, message) {
  element.textContent = message ?? "";
  element.hidden = !message;
}

/** Fills a <select> with "any" plus `values`, keeping the current choice when it is still offered. */
export function fillSelect(select, values, anyLabel = "any") {
  const current = select.value;
  const options = [];
  if (anyLabel !== null) options.push(h("option", { value: "", text: anyLabel }));
  for (const value of values) options.push(h("option", { value: String(value), text: String(value) }));
  select.replaceChildren(...options);
  const offered = options.some((option) => option.value === current);
  select.value = offered ? current : options[0]?.value ?? "";
  return offered || current === "";
}

const TIME_PARTS = { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" };
const thisYear = new Intl.DateTimeFormat(undefined, TIME_PARTS);
const otherYear = new Intl.DateTimeFormat(undefined, { ...TIME_PARTS, year: "numeric" });
const dateOnly = new Intl.DateTimeFormat(undefined, { dateStyle: "medium" });

/** Unix seconds as a readable local date and time ("Nov 23, 11:15:20 AM"; the year when not this one). */
export function formatTime(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const date = new Date(seconds * 1000);
  return (date.getFullYear() === new Date().getFullYear() ? thisYear : otherYear).format(date);
}

/** Unix seconds as ISO 8601 (for title tooltips and <time datetime>). */
export function isoTime(seconds) {
  return new Date(seconds * 1000).toISOString();
}

/** A <time> element for Unix seconds. */
export function timeElement(seconds) {
  if (seconds === null || seconds === undefined) return document.createTextNode("—");
  return h("time", { datetime: isoTime(seconds), title: isoTime(seconds), text: formatTime(seconds) });
}

/** "2026-10-25" (a UTC date) as a short readable date. */
export function formatDay(day) {
  const [year, month, date] = day.split("-").map(Number);
  return dateOnly.format(new Date(year, month - 1, date));
}

/** A value for display: money arrives as its exact text, other numbers via String(). */
export function text(value, empty = "—") {
  if (value === null || value === undefined || value === "") return empty;
  return String(value);
}

let statusTimer = 0;

/** Announces `message` in the page's aria-live status region (a toast for a few seconds). */
export function announce(message, { error = false } = {}) {
  const status = byId("status");
  clearTimeout(statusTimer);
  status.textContent = message ?? "";
  status.classList.toggle("is-error", Boolean(error && message));
  if (message) {
    statusTimer = setTimeout(() => {
      status.textContent = "";
      status.classList.remove("is-error");
    }, error ? 12000 : 6000);
  }
}
