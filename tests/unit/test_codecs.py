"""cairn.codecs without a database: the stored form, bad keys, tampering, CAIRN_KEYS."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from cairn import codecs, limits, serialization
from cairn.codecs import Encrypted, coded, sealed
from cairn.config import Limits
from cairn.errors import ConfigError, SerializationError

K1, K2 = b"\x01" * 32, b"\x02" * 32


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def test_encrypted__round_trips_any_text_with_a_fresh_nonce_each_time() -> None:
    codec = Encrypted({"k1": K1}, "k1")
    for text in ("", '{"a": 1}', "é\u2603\U0001f600", "x" * 100_000):
        first, second = codec.encode(text), codec.encode(text)
        assert first.startswith("aesgcm:k1:") and first != second
        assert codec.decode(first) == codec.decode(second) == text
    assert codec.decode('{"plain": true}') == '{"plain": true}'  # written before: as it is
    assert repr(codec) == "Encrypted(keys=['k1'], current='k1')"  # never the key


@pytest.mark.parametrize(
    ("keys", "current", "message"),
    [
        ({"k1": b"short"}, "k1", "key 'k1' must be 32 bytes, got 5"),
        ({"k1": "a" * 32}, "k1", "key 'k1' must be 32 bytes, got str"),
        ({"k1": K1}, "k2", "current key 'k2' is not among the keys (k1)"),
        ({"k:1": K1}, "k:1", "key id 'k:1' is not 1-64 of letters"),
        ({}, "k1", "Encrypted needs keys"),
    ],
)
def test_encrypted__bad_keys_are_refused_naming_the_key(
    keys: dict[str, object], current: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        Encrypted(keys, current)  # type: ignore[arg-type]
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_encrypted__a_wrong_key_a_missing_key_and_an_altered_value_fail_naming_the_key() -> None:
    stored = Encrypted({"k1": K1}, "k1").encode("secret")
    with pytest.raises(codecs.KeyUnavailable, match=r"key 'k1', which is not among .* \(k2\)"):
        Encrypted({"k2": K2}, "k2").decode(stored)
    with pytest.raises(SerializationError, match="key 'k1': the key is not the one"):
        Encrypted({"k1": K2}, "k1").decode(stored)
    altered = stored[:-4] + ("AAAA" if not stored.endswith("AAAA") else "BBBB")
    with pytest.raises(SerializationError, match="key 'k1': the key is not the one"):
        Encrypted({"k1": K1}, "k1").decode(altered)
    with pytest.raises(SerializationError, match="key 'k1': not valid base64"):
        Encrypted({"k1": K1}, "k1").decode("aesgcm:k1:***")
    # The key id is bound to the ciphertext: relabelling a value does not open it.
    relabelled = stored.replace("aesgcm:k1:", "aesgcm:k2:")
    with pytest.raises(SerializationError, match="key 'k2'"):
        Encrypted({"k1": K1, "k2": K1}, "k1").decode(relabelled)


def test_sealed__the_key_id_is_read_without_keys() -> None:
    stored = Encrypted({"key-2024.1": K1}, "key-2024.1").encode("x")
    assert sealed.key_of(stored) == "key-2024.1"
    assert sealed.shown(stored) == "encrypted (key-2024.1)"
    assert sealed.key_of('"aesgcm:k1:"') is None and sealed.key_of(None) is None


def test_coded__sits_outside_the_size_check_and_step_inputs_keep_the_codec() -> None:
    codec = Encrypted({"k1": K1}, "k1")
    sized = limits.sized(serialization.get("json"), Limits(warn_value_bytes=10, max_value_bytes=20))
    layered = codecs.coding(sized, codec)
    assert codecs.coding(sized, None) is sized
    assert layered.loads(layered.dumps({"a": [1, 2]}, what="v")) == {"a": [1, 2]}
    with pytest.raises(SerializationError, match="over the limit"):
        layered.dumps("x" * 30, what="v")  # measured as plain text, before encryption
    assert coded.codec_of(layered) is codec and coded.under_codec(layered) is sized
    listed = coded.stored_list(layered, [layered.dumps(1, what="a"), layered.dumps("b", what="b")])
    assert listed.startswith("aesgcm:k1:") and layered.loads(listed) == [1, "b"]
    plain = serialization.get("json")
    assert coded.stored_list(plain, ["1", '"b"']) == '[1,"b"]'


def test_coded__readers_without_keys_show_the_key_id() -> None:
    codec = Encrypted({"k1": K1}, "k1")
    plain = serialization.get("json")
    error = codec.encode('{"type": "ValueError", "message": "secret", "traceback": ""}')
    assert coded.shown_error(plain, error) == {
        "type": "",
        "message": "encrypted (k1)",
        "traceback": "",
        "encrypted": "k1",
    }
    assert coded.shown_value(plain, codec.encode('"x"')) == "encrypted (k1)"
    assert coded.shown_text(plain, codec.encode("secret")) == "encrypted (k1)"
    with pytest.raises(SerializationError, match="encrypted with key 'k1', and this process"):
        plain.loads(codec.encode('"x"'))
    with pytest.raises(codecs.KeyUnavailable, match="key 'k1'"):
        coded.unseal(plain, error)
    assert coded.shown_error(codecs.coding(plain, codec), error)["message"] == "secret"


def test_keys__parse_the_operators_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = f"# retired in March\nk1:{b64(K1)}\n  k2:{b64(K2)}  # current\n"
    codec = codecs.parse(text, where="test")
    assert codec.current == "k2" and codec.key_ids == ("k1", "k2")
    assert codecs.parse(f"k1:{b64(K1)},k2:{b64(K2)}", where="t", current="k1").current == "k1"
    for bad, message in (
        ("", "holds no keys"),
        (f"k1:{b64(K1)},k1:{b64(K2)}", "key 'k1' is listed twice"),
        (f":{b64(K1)}", "an entry is not KEY_ID:BASE64_KEY"),
    ):
        with pytest.raises(ConfigError, match=message):
            codecs.parse(bad, where="CAIRN_KEYS")
    for name in ("CAIRN_KEYS", "CAIRN_KEYS_FILE", "CAIRN_CURRENT_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert codecs.from_env() is None
    path = tmp_path / "keys"
    path.write_text(text)
    monkeypatch.setenv("CAIRN_KEYS_FILE", str(path))
    monkeypatch.setenv("CAIRN_CURRENT_KEY", "k1")
    found = codecs.from_env()
    assert found is not None and found.current == "k1"
    monkeypatch.setenv("CAIRN_KEYS_FILE", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match=r"CAIRN_KEYS_FILE names .*missing.*cannot be read"):
        codecs.from_env()
    monkeypatch.setenv("CAIRN_KEYS", f"k1:{b64(K1)}")
    monkeypatch.setenv("CAIRN_CURRENT_KEY", "k3")
    with pytest.raises(ConfigError, match=r"CAIRN_KEYS: current key 'k3' is not among the keys"):
        codecs.from_env()
