// The gateway's JSON API: one fetch wrapper, the key in sessionStorage, exact money text.

const KEY_NAME = "gateway.dashboard.apiKey";

// Fields holding money (or the exchange rate). They are exact decimals in the JSON; the parser
// keeps their source text ("0.000378") instead of a float, so the page shows them as sent.
const MONEY = new Set([
  "balance_inr", "credits_inr", "spent_inr", "held_inr", "usd_to_inr", "spend_inr",
  "cost_usd", "cost_inr", "charged_inr", "cost_usd_total", "cost_usd_input", "cost_usd_output",
  "budget_inr", "reserved_inr", "escrow_inr",
]);

export const session = {
  get key() {
    return sessionStorage.getItem(KEY_NAME);
  },
  set key(value) {
    sessionStorage.setItem(KEY_NAME, value);
  },
  clear() {
    sessionStorage.removeItem(KEY_NAME);
    sessionStorage.clear();
  },
};

export class ApiError extends Error {
  constructor(status, message, type = "", code = "") {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.type = type;
    this.code = code;
  }
}

let unauthorized = () => {};

/** Registers what happens when the API answers 401 (the page signs out). */
export function onUnauthorized(handler) {
  unauthorized = handler;
}

/** A JSON number's text as received, without exponent notation. */
export function plainNumber(text) {
  const match = /^(-?)(\d+)(?:\.(\d*))?[eE]([+-]?\d+)$/.exec(text);
  if (!match) return text;
  const [, sign, whole, fraction = "", exp] = match;
  const digits = whole + fraction;
  const point = whole.length + Number(exp);
  let out;
  if (point <= 0) out = "0." + "0".repeat(-point) + digits;
  else if (point >= digits.length) out = digits + "0".repeat(point - digits.length);
  else out = digits.slice(0, point) + "." + digits.slice(point);
  out = out.replace(/^0+(?=\d)/, "");
  if (out.includes(".")) out = out.replace(/\.?0+$/, "") || "0";
  return sign + out;
}

function revive(key, value, context) {
  if (typeof value === "number" && MONEY.has(key)) {
    return plainNumber(context && typeof context.source === "string" ? context.source : String(value));
  }
  return value;
}

/** Parses a JSON body, money fields as their exact text. */
export function parseJson(text) {
  return JSON.parse(text, revive);
}

/**
 * Calls the API with the session key (or `key`); resolves to the parsed body.
 * Rejects with ApiError carrying the API's error message; a 401 also signs out
 * unless `signOutOn401` is false (the sign-in form checks a candidate key that way).
 */
export async function api(path, { method = "GET", body, key, signOutOn401 = true, signal } = {}) {
  const token = key ?? session.key;
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { method, headers, signal, cache: "no-store", credentials: "omit", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, `The gateway could not be reached (${error.message}).`, "network_error");
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = parseJson(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const error = data && typeof data === "object" ? data.error : null;
    const message = error && error.message ? String(error.message) : `HTTP ${response.status} ${response.statusText}`.trim();
    const failure = new ApiError(response.status, message, error?.type ?? "", error?.code ?? "");
    if (response.status === 401 && signOutOn401) unauthorized(failure);
    throw failure;
  }
  return data;
}
