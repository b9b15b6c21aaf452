"""PERDURE_API_KEYS: parsed and validated once, compared in constant time, never shown."""

import pytest
from pydantic import ValidationError

import perdure.runtime.settings
from perdure.runtime.settings import ApiKeys, Settings

SECRET = "sk-live-7f3a9c"


def test_keys_map_to_their_tenants_and_surrounding_spaces_are_ignored() -> None:
    keys = ApiKeys.parse(f" {SECRET}:alpha , other-key:beta,third:alpha")

    assert len(keys) == 3
    assert keys.tenant_for(SECRET) == "alpha"
    assert keys.tenant_for("other-key") == "beta"
    assert keys.tenant_for("third") == "alpha"
    assert keys.tenant_for("unknown") is None
    assert keys.tenant_for("") is None
    assert keys.tenant_for(SECRET[:-1]) is None


MALFORMED = {
    "no separator": (f"{SECRET}", "entry 1 of 1 must be key:tenant with exactly one ':'"),
    "two separators": (f"{SECRET}:alpha:beta", "entry 1 of 1 must be key:tenant"),
    "an empty entry": (f"{SECRET}:alpha,,b:beta", "entry 2 of 3 is empty"),
    "a trailing comma": (f"{SECRET}:alpha,", "entry 2 of 2 is empty"),
    "an empty key": (":alpha", "entry 1 of 1 has an empty key"),
    "an empty tenant": (f"a:beta,{SECRET}: ", "entry 2 of 2 has an empty tenant"),
    "a key with a space": (f"{SECRET} x:alpha", "entry 1 of 1: a key must be"),
    "a tenant with a slash": (f"{SECRET}:al/pha", "entry 1 of 1: a tenant must be"),
    "a duplicate key": (
        f"{SECRET}:alpha,b:beta,{SECRET}:gamma",
        "entries 1 and 3 have the same key",
    ),
    "only spaces": ("   ", "entry 1 of 1 is empty"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_value_is_refused_with_a_message_that_never_shows_a_key(case: str) -> None:
    value, expected = MALFORMED[case]

    with pytest.raises(ValidationError) as refused:
        Settings.model_validate({"PERDURE_API_KEYS": value})

    message = str(refused.value)
    assert expected in message
    assert SECRET not in message
    assert "PERDURE_API_KEYS" in message


def test_the_settings_read_and_validate_the_environment_once_at_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PERDURE_API_KEYS", f"{SECRET}:alpha,{SECRET}:beta")
    with pytest.raises(ValidationError, match="entries 1 and 2 have the same key"):
        Settings()

    monkeypatch.setenv("PERDURE_API_KEYS", f"{SECRET}:alpha")
    settings = Settings()

    assert settings.api_keys is not None
    assert settings.api_keys.tenant_for(SECRET) == "alpha"


def test_unset_or_empty_means_no_authentication(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PERDURE_API_KEYS", raising=False)
    assert Settings().api_keys is None
    monkeypatch.setenv("PERDURE_API_KEYS", "")
    assert Settings().api_keys is None


def test_keys_never_appear_in_repr_dumps_or_json() -> None:
    settings = Settings.model_validate({"PERDURE_API_KEYS": f"{SECRET}:alpha"})

    shown = [
        repr(settings),
        str(settings),
        repr(settings.api_keys),
        str(settings.model_dump()),
        settings.model_dump_json(),
    ]

    assert all(SECRET not in text for text in shown), shown
    assert settings.model_dump()["api_keys"] == "**********"


def test_every_known_key_is_compared_in_constant_time_whichever_matches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = ApiKeys.parse(f"{SECRET}:alpha,second:beta,third:gamma")
    compared: list[tuple[int, int]] = []
    real = perdure.runtime.settings.hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(perdure.runtime.settings.hmac, "compare_digest", counting)

    for presented in (SECRET, "third", "nobody", "x" * 400):
        compared.clear()
        keys.tenant_for(presented)
        assert len(compared) == 3, presented
        assert all(pair == (32, 32) for pair in compared), "fixed-length digests: no length leak"
