"""Properties of the era switch: whatever `_meta` a request carries (none, the wrong type, an
unknown or huge version, junk nested anywhere), the answer is a result or one of the
documented errors, modern results carry their envelope, and the server keeps serving."""

from __future__ import annotations

from helpers import hypothesis_profiles  # noqa: F401  (loads the fuzz profile)
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from helpers.delivery_support import FLAT_INTERVIEW
from helpers.modern_support import (
    SUPPORTED_VERSIONS,
    assert_every_modern_message_fits,
    assert_modern_result,
    modern_params,
    server_requests,
)
from helpers.strategies import (
    KEY_CLIENT_CAPABILITIES,
    KEY_PROTOCOL_VERSION,
    MISSING,
    MODERN_VERSION,
    json_values,
    request_metas,
)
from helpers.support import SubprocessServer, interview

jsonschema = pytest.importorskip("jsonschema")

REQUESTS = {
    "server/discover": {},
    "tools/list": {},
    "tools/call": {"name": "ask_user_rich", "arguments": interview(delivery="link")},
    "tasks/get": {"taskId": "no-such-task"},
    "ping": {},
}


@pytest.fixture(scope="module")
def peer(tmp_path_factory):
    server = SubprocessServer(tmp_path_factory.mktemp("modern-fuzz") / "logs")
    yield server
    assert server_requests(server) == []  # not one request of ours on stdout, whatever came in
    assert server.close() == 0
    assert_every_modern_message_fits(server)  # and every answer to a modern request fits the schema


def check_answer(method: str, meta, reply: dict) -> None:
    """The rules of the era switch for one reply."""
    assert ("result" in reply) != ("error" in reply), reply
    modern = isinstance(meta, dict) and KEY_PROTOCOL_VERSION in meta
    error = reply.get("error")
    if not modern:
        if method in ("tools/list", "tools/call", "ping"):
            assert error is None, reply  # the legacy era ignores a _meta it does not use
            assert "resultType" not in reply["result"]
        elif error is not None:
            assert error["code"] in (-32601, -32602), reply
        return
    version = meta[KEY_PROTOCOL_VERSION]
    capabilities = meta.get(KEY_CLIENT_CAPABILITIES, MISSING)
    if version != MODERN_VERSION:
        assert error is not None, reply
        if isinstance(version, str) and isinstance(capabilities, dict):
            assert error["code"] == -32022, reply
        assert error["code"] in (-32022, -32602), reply
        if error["code"] == -32022:
            assert error["data"]["supported"] == SUPPORTED_VERSIONS
            # The schema types `requested` as a string: echoed when it was one, else written as one.
            assert error["data"]["requested"] == version if isinstance(version, str) else \
                isinstance(error["data"]["requested"], str)
        return
    if not isinstance(capabilities, dict):
        assert error is not None and error["code"] == -32602, reply
        return
    if method == "tasks/get":
        assert error is not None and error["code"] == -32602, reply
        return
    if error is not None:
        assert error["code"] == -32602, reply
        return
    if method != "ping":
        assert_modern_result(reply["result"])


@given(method=st.sampled_from(sorted(REQUESTS)), meta=request_metas)
def test_any_meta_gets_a_result_or_a_documented_error_and_the_server_keeps_serving(peer, method, meta):
    params = dict(REQUESTS[method])
    if meta is not MISSING:
        params["_meta"] = meta
    reply = peer.call(method, params, timeout=30)
    check_answer(method, meta, reply)
    assert peer.call("ping")["result"] == {}


@given(meta=request_metas, params_shape=st.sampled_from(["list", "string", "null", "number"]))
def test_params_that_are_no_object_never_break_the_era_switch(peer, meta, params_shape):
    params = {"list": [meta] if meta is not MISSING else [], "string": "x", "null": None, "number": 5}[params_shape]
    reply = peer.call("tools/list", params, timeout=30)
    assert ("result" in reply) != ("error" in reply), reply
    if "error" in reply:
        assert reply["error"]["code"] in (-32600, -32602), reply
    assert peer.call("ping")["result"] == {}


@given(state=st.one_of(st.text(max_size=200), json_values(3)))
@example(state="\x80.0")  # non-ASCII text where a sealed state's encoding is expected
@example(state="\u00e9t\u00e9.\u00e9t\u00e9")
@example(state="\ud800.x")
@example(state="a.b.c")
def test_any_request_state_but_the_one_we_issued_is_refused_and_changes_nothing(peer, state):
    elicit = dict(FLAT_INTERVIEW, delivery="elicitation")
    capabilities = {"elicitation": {"form": {}}}
    params = {"name": "ask_user_rich", "arguments": elicit}
    first = peer.call("tools/call", modern_params(params, capabilities=capabilities), timeout=30)["result"]
    assert first["resultType"] == "input_required"
    retried = dict(params, requestState=state, inputResponses={"answers": {"action": "decline"}})
    reply = peer.call("tools/call", modern_params(retried, capabilities=capabilities), timeout=30)
    if state is None:
        # No state at all is a first call again: it asks again, it settles nothing.
        assert reply["result"]["resultType"] == "input_required", reply
    elif state != first["requestState"]:
        assert reply["error"]["code"] == -32602, reply
        assert reply["error"]["message"].startswith("invalid requestState: ")
    # Whatever happened, the first interview still takes the real answer.
    accepted = dict(params, requestState=first["requestState"],
                    inputResponses={"answers": {"action": "accept", "content": {"db": "pg"}}})
    result = peer.call("tools/call", modern_params(accepted, capabilities=capabilities), timeout=30)["result"]
    assert result["structuredContent"]["status"] == "submitted", result


ELICIT = dict(FLAT_INTERVIEW, delivery="elicitation")
CONSTS = ["pg", "my", "cache", "queue", "search", "zz"]
field_values = st.one_of(json_values(3), st.sampled_from(CONSTS), st.lists(st.sampled_from(CONSTS), max_size=4))
input_responses = st.one_of(
    json_values(4),
    st.fixed_dictionaries({"answers": st.one_of(
        json_values(3),
        st.fixed_dictionaries({"action": st.one_of(st.sampled_from(["accept", "decline", "cancel"]), json_values(1))},
                              optional={"content": st.one_of(json_values(3), st.dictionaries(
                                  st.sampled_from(["db", "db__other", "extras", "extras__other", "free", "x"]),
                                  field_values, max_size=6))}),
    )}),
)


@pytest.fixture(scope="module")
def ask_output_schema(peer):
    tools = peer.call("tools/list", modern_params())["result"]["tools"]
    return next(tool["outputSchema"] for tool in tools if tool["name"] == "ask_user_rich")


@given(responses=input_responses)
def test_any_input_responses_with_a_good_state_ask_again_or_settle_with_a_valid_result(
        peer, ask_output_schema, responses):
    capabilities = {"elicitation": {"form": {}}}
    params = {"name": "ask_user_rich", "arguments": ELICIT}
    first = peer.call("tools/call", modern_params(params, capabilities=capabilities), timeout=30)["result"]
    retried = dict(params, requestState=first["requestState"], inputResponses=responses)
    reply = peer.call("tools/call", modern_params(retried, capabilities=capabilities), timeout=30)
    assert "result" in reply, reply
    result = reply["result"]
    if result["resultType"] == "input_required":
        assert result["inputRequests"] == first["inputRequests"]
    else:
        assert_modern_result(result)
        structured = result["structuredContent"]
        assert structured["status"] in ("submitted", "declined", "cancelled") and structured["via"] == "elicitation"
        jsonschema.validate(structured, ask_output_schema)
        for row, question in zip(structured["answers"], ELICIT["questions"]):
            assert set(row["selected"]) <= {option["id"] for option in question.get("options", [])}
    assert peer.call("ping")["result"] == {}


task_params = st.one_of(
    json_values(4),
    st.fixed_dictionaries({"taskId": st.one_of(st.text(max_size=40), json_values(2),
                                               st.from_regex(r"\A[0-9a-f]{12}\.[0-9]{1,3}\Z"))},
                          optional={"inputResponses": json_values(3)}),
)


@given(method=st.sampled_from(["tasks/get", "tasks/cancel", "tasks/update"]), params=task_params)
def test_any_task_request_gets_a_result_or_32602_and_the_server_keeps_serving(peer, method, params):
    modern = isinstance(params, dict)
    # Params that are no object carry no _meta either: a legacy request, where tasks do not exist.
    reply = peer.call(method, modern_params(params, tasks=True) if modern else params, timeout=30)
    assert ("result" in reply) != ("error" in reply), reply
    if "error" in reply:
        assert reply["error"]["code"] in ((-32602,) if modern else (-32600, -32601, -32602)), reply
    else:
        assert modern, reply
        assert_modern_result(reply["result"])
    assert peer.call("ping")["result"] == {}
