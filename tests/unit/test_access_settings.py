"""PERDURE_RATE_LIMIT and PERDURE_CORS_ORIGINS: each value works or stops the process with a
message saying what is expected."""

import pytest
from pydantic import ValidationError

from perdure.domain.access import Rate
from perdure.runtime.settings import Settings


def settings(**env: str) -> Settings:
    return Settings.model_validate(env)


def test_a_rate_is_a_count_per_unit() -> None:
    assert settings(PERDURE_RATE_LIMIT="60/minute").rate_limit == Rate(60, 60)
    assert settings(PERDURE_RATE_LIMIT=" 5 / Second ").rate_limit == Rate(5, 1)
    assert settings().rate_limit is None


@pytest.mark.parametrize("value", ["60", "60/fortnight", "0/minute", "-1/hour", "1.5/day"])
def test_a_malformed_rate_is_refused_with_the_expected_form(value: str) -> None:
    with pytest.raises(ValidationError, match=r"N/second, N/minute, N/hour or N/day"):
        settings(PERDURE_RATE_LIMIT=value)


def test_cors_origins_are_exact_origins() -> None:
    configured = settings(PERDURE_CORS_ORIGINS="https://app.example.com, http://localhost:3000")

    assert configured.cors_origins == ("https://app.example.com", "http://localhost:3000")
    assert settings().cors_origins == ()


@pytest.mark.parametrize(
    "value",
    [
        "https://app.example.com/",
        "https://app.example.com/path",
        "app.example.com",
        "ftp://app.example.com",
        "https://App.example.com",
        "https://app.example.com:99999",
        "https://*.example.com",
        "*,https://app.example.com",
    ],
)
def test_a_malformed_cors_origin_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match=r"PERDURE_CORS_ORIGINS"):
        settings(PERDURE_CORS_ORIGINS=value)


def test_any_origin_is_refused_together_with_credentials() -> None:
    assert settings(PERDURE_CORS_ORIGINS="*").cors_origins == ("*",)
    with pytest.raises(ValidationError, match=r"list exact origins"):
        settings(PERDURE_CORS_ORIGINS="*", PERDURE_CORS_CREDENTIALS="true")
