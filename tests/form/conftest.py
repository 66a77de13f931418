"""Fixtures shared by the tests of the form server in this folder."""

from __future__ import annotations

import pytest

from helpers.support import choice, interview


@pytest.fixture
def opened(runtime, request):
    """An interview open in `runtime`, asking the test module's OPENED questions (one choice
    question "q" where the module names none)."""
    return runtime.open_interview(interview(*getattr(request.module, "OPENED", (choice("q", "a", "b"),))))
