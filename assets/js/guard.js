// The form's token goes only to a server that proved it knows it. The first load needs no
// proof: the person just followed the link. Once the connection is lost (the events stream
// dropped, a request failed), nothing carrying the token is sent until the server at this
// address proves it knows the token (prove.js), naming the token only by its SHA-256: another
// user may have taken the port meanwhile, and must learn nothing.
import { token } from "./state.js";
import { askProof, canProve, newNonce, proofVerdict, sha256Hex } from "./prove.js";

let trusted = true;
let refused = false;
let proving = null;
let onRefused = () => {};

export const isTrusted = () => trusted && !refused;
export const proofRefused = () => refused;
export function whenRefused(fn) { onRefused = fn; }
export function connectionLost() { trusted = false; }

async function prove() {
  // A page served on an origin that is not a secure context has no Web Crypto to check with.
  if (!canProve()) return "ours";
  const nonce = newNonce();
  const named = await sha256Hex(token);
  return askProof(`/api/prove?nonce=${nonce}&token-sha256=${named}`,
    (body) => proofVerdict(token, nonce, body.proof, body.origin));
}

// "ours" once requests carrying the token may go; "unreachable" (try later), "not-found" (the
// server no longer knows this interview) or "impostor" (never again: the person is told why:
// `onRefused("relayed")` when the proof came from one of our servers at another address).
export async function mayTalk() {
  if (refused) return "impostor";
  if (trusted) return "ours";
  if (!proving) proving = prove().finally(() => { proving = null; });
  const verdict = await proving;
  if (verdict === "ours") trusted = true;
  if (verdict === "relayed" || verdict === "impostor") {
    if (!refused) { refused = true; onRefused(verdict); }
    return "impostor";
  }
  return verdict;
}

const NOT_FOUND = () => new Response(JSON.stringify({ error: "not found", code: "not-found" }),
  { status: 404, headers: { "Content-Type": "application/json" } });

// fetch() for the form's own API: refused (a TypeError, as for a network failure) while the
// server has not proven itself; a failure marks the connection lost.
export async function guardedFetch(url, init) {
  const verdict = await mayTalk();
  if (verdict === "not-found") return NOT_FOUND();
  if (verdict !== "ours") throw new TypeError("the server at this address has not proven it is this form's");
  try {
    return await fetch(url, init);
  } catch (error) {
    connectionLost();
    throw error;
  }
}
