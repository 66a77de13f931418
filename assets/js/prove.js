// A server proves it knows a secret without the page sending it: the page sends a fresh nonce,
// the server answers hex(HMAC-SHA256(secret, "<nonce> <origin>")) for the origin it answers at,
// and the page checks it with Web Crypto (there on http://localhost, a secure context) for its
// own origin. Used after a lost connection, before anything carrying the secret goes out again:
// another program may hold the address by then, and a proof it fetched from one of our servers
// at another port names that port's origin, not this page's.

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

// "ours" when `proof` proves `secret` for this page's origin; "relayed" when it proves it for
// the other origin the server named (a program at this address passed the question on to one
// of our servers elsewhere); else "impostor".
export async function proofVerdict(secret, nonce, proof, origin) {
  if (typeof proof !== "string") return "impostor";
  if (proof === await hmacHex(secret, `${nonce} ${location.origin}`)) return "ours";
  if (typeof origin === "string" && origin !== location.origin
    && proof === await hmacHex(secret, `${nonce} ${origin}`)) return "relayed";
  return "impostor";
}

// Asks `url` (which names `nonce`), sending no cookie and following no redirect.
// "unreachable" (nothing answered), "not-found" (a 404 that says so), or what `expected(body)`
// resolves to ("ours", "relayed", "impostor"); "impostor" for anything else.
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
    const verdict = await expected(body);
    return verdict === "ours" || verdict === "relayed" ? verdict : "impostor";
  } catch {
    return "impostor";
  }
}
