"""Hypothesis settings for the fuzz tests: `ci` (short, the default) and `long`.

Import this module from a test module before using `@given`; it loads the profile that
`ASK_USER_RICH_FUZZ` names. `ASK_USER_RICH_FUZZ=long bash tests/run.sh -m slow` runs the long
fuzz and soak tests (marked `slow`) with many examples per property; the default run gives
each of them a few short examples, so none is ever skipped.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

ENV_FUZZ = "ASK_USER_RICH_FUZZ"

_COMMON = dict(
    deadline=None,  # a subprocess or a socket round trip is slow on a loaded CI machine
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.data_too_large, HealthCheck.large_base_example],
    print_blob=True,
)
# ci: few examples, derandomized, so that the default suite is quick and a red CI run is
# reproducible on any machine.
settings.register_profile("ci", max_examples=40, derandomize=True, **_COMMON)
settings.register_profile("long", max_examples=2000, **_COMMON)

PROFILE = "long" if os.environ.get(ENV_FUZZ, "").strip().lower() == "long" else "ci"
LONG = PROFILE == "long"
settings.load_profile(PROFILE)


def examples(ci: int, long: int) -> settings:
    """Per-test example counts where a property is costlier than the profile assumes."""
    return settings(max_examples=long if LONG else ci)
