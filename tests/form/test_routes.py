"""The form server's route table: one place decides 404 and 405 (with Allow), testable without a
socket, and the live server answers the same."""

from __future__ import annotations

import pytest

import askrich
from helpers.support import api_url, choice, http_request

EVERY_METHOD = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT")
# One concrete path per route pattern, with the methods its routes take.
PATHS = {
    "/s/TOKEN": {"GET"},
    "/assets/js/main.js": {"GET"},
    "/api/s/TOKEN": {"GET"},
    "/api/s/TOKEN/state": {"GET"},
    "/api/s/TOKEN/events": {"GET"},
    "/api/s/TOKEN/inbox": {"GET"},
    "/api/prove": {"GET"},
    "/api/s/TOKEN/progress": {"POST"},
    "/api/s/TOKEN/visibility": {"POST"},
    "/api/s/TOKEN/submit": {"POST"},
    "/api/s/TOKEN/attachments": {"POST"},
    "/api/s/TOKEN/attachments/0123abcd": {"GET", "DELETE"},
}


def refusal(method, path):
    with pytest.raises(askrich.HttpRefusal) as caught:
        askrich.resolve_route(method, path)
    return caught.value


def test_every_route_pattern_has_a_concrete_path_here():
    patterns = {pattern for _, pattern, _ in askrich.ROUTES}
    matched = {pattern for pattern in patterns
               if any(askrich.match_path(pattern, path) is not None for path in PATHS)}
    assert matched == patterns


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_known_path_with_a_wrong_method_is_405_naming_the_methods_it_takes(path):
    for method in EVERY_METHOD:
        if method in PATHS[path]:
            continue
        refused = refusal(method, path)
        assert refused.status == 405, (method, path)
        assert set(refused.headers["Allow"].split(", ")) == PATHS[path]
        assert refused.reply().status == 405 and refused.reply().headers["Allow"] == refused.headers["Allow"]


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS"])
def test_head_and_options_are_refused_on_the_form_page_with_allow_get(method):
    refused = refusal(method, "/s/TOKEN")
    assert (refused.status, refused.headers) == (405, {"Allow": "GET"})


@pytest.mark.parametrize(
    "path",
    ["/", "", "*", "/s", "/s/", "/api/s/", "/s/a/b", "/api", "/api/s", "/api/s/TOKEN/nope", "/api/s/TOKEN/submit/",
     "/api/s/TOKEN//submit", "/S/TOKEN", "/api/S/TOKEN", "/assets", "http://localhost/s/TOKEN",
     "/askrich.py", "/api/s/TOKEN/attachments/", "/api/s/TOKEN/attachments/a/b"],
)
def test_an_unknown_path_is_404_for_every_method(path):
    for method in EVERY_METHOD:
        refused = refusal(method, path)
        assert refused.status == 404, (method, path)
        assert "Allow" not in refused.headers
        assert refused.body == {"error": "not found", "code": "not-found"}


def test_a_good_route_resolves_with_its_parameters():
    route, params = askrich.resolve_route("POST", "/api/s/abc-_123/submit?x=/y")
    assert route is askrich.route_submit and params == {"token": "abc-_123"}
    route, params = askrich.resolve_route("GET", "/s/abc")
    assert route is askrich.route_form_page and params == {"token": "abc"}
    route, params = askrich.resolve_route("GET", "/assets/vendor/purify.es.mjs")
    assert route is askrich.route_asset and params == {"name": "vendor/purify.es.mjs"}
    route, params = askrich.resolve_route("DELETE", "/api/s/tok/attachments/0123abcd")
    assert route is askrich.route_attachment_remove and params == {"token": "tok", "id": "0123abcd"}
    route, params = askrich.resolve_route("GET", "/assets/")
    assert route is askrich.route_asset and params == {"name": ""}


# -- the same on a live server ------------------------------------------------------------------

# The questions of the `opened` fixture's interview (form/conftest.py).
OPENED = (choice("q", "a", "b"),)


def test_a_live_server_answers_405_with_allow_on_the_page_and_api(runtime, opened):
    cases = [(runtime.form_url(opened), "POST", "GET"), (runtime.form_url(opened), "DELETE", "GET"),
             (api_url(runtime.form_url(opened), "submit"), "GET", "POST"), (api_url(runtime.form_url(opened), "state"), "PUT", "GET"),
             (api_url(runtime.form_url(opened), "progress"), "OPTIONS", "POST")]
    for url, method, allow in cases:
        response = http_request(url, method)
        assert response.status == 405, (url, method)
        assert response.headers["Allow"] == allow
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert isinstance(response.json()["error"], str)
    assert http_request(api_url(runtime.form_url(opened), "state")).json()["state"] == "pending"


def test_a_live_server_answers_404_without_allow_on_unknown_paths(runtime, opened):
    response = http_request(api_url(runtime.form_url(opened), "nope"), "POST")
    assert response.status == 404 and "Allow" not in response.headers
    assert response.json() == {"error": "not found", "code": "not-found"}


def test_a_foreign_host_is_403_before_any_405(runtime, opened):
    response = http_request(runtime.form_url(opened), "DELETE", headers={"Host": "evil.example"})
    assert response.status == 403 and "Allow" not in response.headers
