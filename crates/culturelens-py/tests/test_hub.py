"""`from_pretrained` of a hub id (`ORG/NAME[@REVISION]`) goes through the CLI's hub client
(`culturelens_models_io::hub`, `--model`): without a reachable hub and with an empty cache, a
missing id raises the CLI's message."""

import socket

import pytest

import culturelens
from conftest import ROOT


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """A hub endpoint nothing listens on and an empty hub cache, for this process and the CLI's."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        endpoint = "http://127.0.0.1:%d" % s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return endpoint


def test_a_missing_hub_id_offline_raises_the_cli_message(cli, tmp_path, offline):
    images = ROOT / "tests" / "fixtures" / "encoders" / "images"
    for load, command in [
        (culturelens.Encoder.from_pretrained, ["embed", "--images", images, "--out", tmp_path / "e.npy"]),
        (culturelens.Pipeline.from_pretrained, ["generate", "--prompt", "a street", "--out", tmp_path / "out"]),
    ]:
        done = cli(*command[:1], "--model", "nobody/no-such-model", *command[1:])
        assert done.returncode != 0
        message = done.stderr.strip().removeprefix("error: ")
        with pytest.raises(ValueError) as raised:
            load("nobody/no-such-model")
        print(f"{command[0]}: {raised.value}")
        assert str(raised.value) == message
        assert "--model nobody/no-such-model" in message and offline.removeprefix("http://") in message


def test_paths_are_never_taken_for_hub_ids(tmp_path, offline):
    # An absolute or relative path that does not exist is a folder error, not a download.
    for folder in [tmp_path / "org" / "name", "./org/name"]:
        with pytest.raises(ValueError) as raised:
            culturelens.Encoder.from_pretrained(folder)
        assert "--model" not in str(raised.value), raised.value
