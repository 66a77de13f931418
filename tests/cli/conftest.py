"""Fixtures shared by the tests of the command line and the .pyz in this folder."""

from __future__ import annotations

import pytest

from helpers import zipapp_support as zs


@pytest.fixture(scope="module")
def pyz(tmp_path_factory):
    """askrich.pyz as built from a frozen copy of this checkout, once for the whole run."""
    return zs.shared_pyz(tmp_path_factory)
