"""A process reaches Temporal Cloud (or any TLS/API-key cluster) with the variables every
Temporal SDK reads; with none of them it connects in plain text, as to a dev server."""

from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from perdure.runtime.temporal_connection import TemporalConnectionConfigError, connection_options


def test_without_connection_variables_the_connection_is_plain() -> None:
    assert connection_options({}) == {}


def test_an_api_key_turns_tls_on() -> None:
    assert connection_options({"TEMPORAL_API_KEY": "secret-key"}) == {
        "api_key": "secret-key",
        "tls": True,
    }


def test_client_certificate_files_are_read_for_mutual_tls(tmp_path: Path) -> None:
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    cert.write_bytes(b"CERT")
    key.write_bytes(b"KEY")

    options = connection_options(
        {"TEMPORAL_TLS_CLIENT_CERT_PATH": str(cert), "TEMPORAL_TLS_CLIENT_KEY_PATH": str(key)}
    )

    tls = options["tls"]
    assert isinstance(tls, TLSConfig)
    assert (tls.client_cert, tls.client_private_key) == (b"CERT", b"KEY")


def test_a_missing_certificate_file_is_a_clear_error_that_shows_no_key(tmp_path: Path) -> None:
    with pytest.raises(TemporalConnectionConfigError) as raised:
        connection_options(
            {
                "TEMPORAL_API_KEY": "secret-key",
                "TEMPORAL_TLS_CLIENT_CERT_PATH": str(tmp_path / "missing.pem"),
                "TEMPORAL_TLS_CLIENT_KEY_PATH": str(tmp_path / "missing.key"),
            }
        )

    assert "TEMPORAL_TLS" in str(raised.value)
    assert "No such file" in str(raised.value)
    assert "secret-key" not in str(raised.value)
