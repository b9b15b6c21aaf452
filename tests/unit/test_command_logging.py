"""What a server command logs: its own lines, not one per HTTP request of the provider SDKs."""

import logging

import pytest

from perdure.commands.configuration import configured


@pytest.mark.parametrize("client", ["httpx", "httpx2"])
def test_the_provider_http_clients_log_warnings_not_every_request(
    client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logging.getLogger(client), "level", logging.NOTSET)

    configured()

    http_log = logging.getLogger(client)
    assert not http_log.isEnabledFor(logging.INFO)
    assert http_log.isEnabledFor(logging.WARNING)
