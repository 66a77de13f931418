"""The form's files as shipped: vendored libraries match their recorded checksums, every file the
page loads is on the server's allow-list, and nothing inline would need a CSP exception.
(No browser needed.)"""
import hashlib
import re

import askrich
from formkit import ROOT

ASSETS = ROOT / "assets"


def test_vendored_files_match_the_checksums_in_their_readme():
    readme = (ASSETS / "vendor" / "README").read_text(encoding="utf-8")
    recorded = dict(re.findall(r"file:\s+(\S+).*?\n\s+sha256:\s+([0-9a-f]{64})", readme))
    assert set(recorded) == {"marked.esm.js", "purify.es.mjs", "qrcode.mjs"}
    for name, digest in recorded.items():
        assert hashlib.sha256((ASSETS / "vendor" / name).read_bytes()).hexdigest() == digest, name
    for licence in ("marked.LICENSE", "dompurify.LICENSE", "qrcode.LICENSE"):
        assert (ASSETS / "vendor" / licence).stat().st_size > 500


def loaded_by_the_page():
    """Every /assets/ path that form.html and the modules it imports reference."""
    seen, todo = set(), ["form.html"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        text = (ASSETS / name).read_text(encoding="utf-8")
        refs = re.findall(r'["\'](/assets/[^"\']+)["\']', text)
        refs += ["/assets/js/" + m for m in re.findall(r'from\s+"\./([^"]+)"', text)]
        for ref in refs:
            todo.append(ref[len("/assets/"):])
    return seen


def test_every_file_the_page_loads_is_on_the_allow_list():
    names = loaded_by_the_page()
    assert {"form.html", "form.css", "js/main.js", "vendor/marked.esm.js", "vendor/purify.es.mjs",
            "js/share.js", "js/visibility.js", "vendor/qrcode.mjs"} <= names
    assert names <= set(askrich.ASSET_FILES)


def test_the_page_has_no_inline_script_style_or_handler():
    html = (ASSETS / "form.html").read_text(encoding="utf-8")
    assert re.findall(r"<script(?![^>]*\bsrc=)", html) == []
    assert "<style" not in html
    assert re.search(r"\sstyle=", html) is None
    assert re.search(r"\son[a-z]+=", html) is None
    for js in (ASSETS / "js").glob("*.js"):
        text = js.read_text(encoding="utf-8")
        assert "innerHTML" not in text and "insertAdjacentHTML" not in text, js.name
        assert "eval(" not in text and "new Function" not in text, js.name
        assert "setAttribute(\"style\"" not in text, js.name
