// A server proves it knows a secret without the page sending it: the page sends a fresh nonce,
// the server answers hex(HMAC-SHA256(secret, nonce)), and the page checks it with Web Crypto
// (there on http://localhost, a secure context). Used after a lost connection, before anything
// carrying the secret goes out again: another program may hold the address by then.

const encoder = new TextEncoder();
const hex = (buffer) => [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, "0")).join("");

export const canProve = () => typeof crypto === "object" && !!crypto.subtle;

export function newNonce() {
  return hex(crypto.getRandomValues(new Uint8Array(16)));
}

export async function sha256Hex(text) {
  return hex(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

export async function hmacHex(secret, message) {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" },
    false, ["sign"]);
  return hex(await crypto.subtle.sign("HMAC", key, encoder.encode(message)));
}

// Asks `url` (which names `nonce`), sending no cookie and following no redirect.
// "unreachable" (nothing answered), "not-found" (a 404 that says so), "ours" (`expected(body)`
// resolved to true) or "impostor" (anything else).
export async function askProof(url, expected) {
  let r;
  try {
    r = await fetch(url, { cache: "no-store", credentials: "omit", redirect: "error" });
  } catch {
    return "unreachable";
  }
  const body = await r.json().catch(() => null);
  if (r.status === 404 && body && body.code === "not-found") return "not-found";
  if (r.status !== 200 || !body || typeof body !== "object") return "impostor";
  try {
    return (await expected(body)) ? "ours" : "impostor";
  } catch {
    return "impostor";
  }
}
