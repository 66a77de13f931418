// "Open on another device": the address this page is served at through the person's tunnel
// (ASK_USER_RICH_PUBLIC_URL), as a QR code drawn here from the vendored qrcode-generator, as SVG
// squares built with the DOM. Nothing leaves the page.
import qrcode from "/assets/vendor/qrcode.mjs";
import { t, tPlain } from "./i18n.js";

const SVG = "http://www.w3.org/2000/svg";
const QUIET = 4; // the blank modules around a code that a scanner needs

// One path of unit squares, one for every dark module, on a white square: a scanner needs dark
// on light whatever the page's theme.
function drawCode(text) {
  const code = qrcode(0, "M");
  code.addData(text);
  code.make();
  const count = code.getModuleCount();
  const size = count + QUIET * 2;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${size} ${size}`);
  svg.setAttribute("class", "share-code");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", tPlain("share.codeLabel"));
  const back = document.createElementNS(SVG, "rect");
  back.setAttribute("width", String(size));
  back.setAttribute("height", String(size));
  back.setAttribute("class", "share-light");
  let d = "";
  for (let row = 0; row < count; row++) {
    for (let col = 0; col < count; col++) {
      if (code.isDark(row, col)) d += `M${col + QUIET} ${row + QUIET}h1v1h-1z`;
    }
  }
  const dark = document.createElementNS(SVG, "path");
  dark.setAttribute("d", d);
  dark.setAttribute("class", "share-dark");
  svg.append(back, dark);
  return svg;
}

// The dialog, made on first use (the form and the inbox share it).
function shareDialog() {
  const found = document.getElementById("share");
  if (found) return found;
  const make = (tag, className, text = "") => {
    const el = document.createElement(tag);
    el.className = className;
    el.textContent = text;
    return el;
  };
  const dialog = make("dialog", "help share-dialog");
  dialog.id = "share";
  dialog.setAttribute("aria-labelledby", "share-title");
  const head = make("div", "help-head");
  const title = make("h2", "", t("share.title"));
  title.id = "share-title";
  const close = make("button", "btn", t("help.close"));
  close.type = "button";
  close.addEventListener("click", () => dialog.close());
  head.append(title, close);
  const address = make("p", "share-url");
  address.dir = "ltr";
  dialog.append(head, make("p", "share-text"), make("div", "share-box"), address);
  document.body.append(dialog);
  return dialog;
}

// Shows `url` in the dialog: its code, the address as text to read or copy, and `text` saying
// what opening it there means.
export function showShare(url, text) {
  const dialog = shareDialog();
  dialog.querySelector(".share-box").replaceChildren(drawCode(url));
  dialog.querySelector(".share-url").textContent = url;
  dialog.querySelector(".share-text").textContent = text;
  if (!dialog.open) dialog.showModal();
}
