"""The front door through a real tunnel (README "Agents on another machine"): Debian's OpenSSH
server on loopback, run by the test with a throwaway key, and one `ssh -L` forward of the door
that answers the forms of two agents' processes. Forwarded to another local port (the laptop's
own port is taken here by the door itself), so ASK_USER_RICH_PUBLIC_URL names it."""

from __future__ import annotations

import os

import pytest

from helpers.inbox_support import Agent, free_port
from helpers.support import EventsReader, api_url, http_request, submit
from helpers.tunnels_support import SSHD, SshServer

pytestmark = [
    pytest.mark.skipif(os.name != "posix", reason="OpenSSH's server is run as on Debian"),
    pytest.mark.skipif(not os.path.exists(SSHD) and os.environ.get("ASK_USER_RICH_TESTS_REQUIRE_CHROMIUM") != "1",
                       reason="openssh-server is not installed (tests/run.sh installs it, and then requires it)"),
]


def test_one_ssh_forward_of_the_door_answers_every_agents_form(tmp_path):
    door, laptop = free_port(), free_port()
    logs = tmp_path / "logs"
    env = {"ASK_USER_RICH_PUBLIC_URL": "http://localhost:%d" % laptop}
    sshd = SshServer(tmp_path / "ssh")
    agents = []
    try:
        agents.append(Agent(logs, door, "claude-code", tmp_path / "one", "Schema", env=env))
        agents[0].server.log.wait_for("inbox-holding")
        agents.append(Agent(logs, door, "codex", tmp_path / "two", "Deploy", env=env))
        tunnel = sshd.forward(laptop, door)
        try:
            for agent in agents:
                # The link each agent shows is the laptop's end of the one forward.
                assert agent.url.startswith("http://localhost:%d/s/" % laptop)
                assert http_request(agent.url).status == 200
            events = EventsReader(api_url(agents[1].url, "events"), "state")
            try:
                events.wait_for(lambda s: s["state"] == "pending")
                origin = {"Origin": "http://localhost:%d" % laptop}
                for agent in agents:
                    reply = http_request(api_url(agent.url, "submit"), "POST",
                                         {"answers": {"q1": {"selected": ["b"]}}}, headers=origin)
                    assert reply.status == 200, reply.body
                events.wait_for(lambda s: s["state"] == "submitted", what="the submit, through the tunnel")
            finally:
                events.close()
            for agent in agents:
                result = agent.server.tool("await_user_answers", {"sessionId": agent.session})
                assert result["result"]["structuredContent"]["answers"][0]["selected"] == ["b"]
            assert any("Accepted publickey" in line for line in sshd.lines)
            # Nothing but the tunnel's own name is taken: another Origin is refused through it.
            assert submit(agents[0].url, {}).status in (409,)  # settled: refused, as directly
            foreign = http_request(api_url(agents[0].url, "state"), headers={"Origin": "http://evil.example"})
            assert foreign.status == 403
        finally:
            tunnel.close()
    finally:
        for agent in agents:
            agent.close()
        sshd.close()
