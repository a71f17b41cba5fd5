"""``--config FILE.toml`` as editors save it: a byte-order mark (Windows Notepad) is read like
plain UTF-8, and a folder given for the file is named as a folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from preflab.config import TrainConfig
from preflab.config.file import config_to_toml, load_config, read_config_file
from preflab.errors import ConfigError


def test_a_config_file_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    f = tmp_path / "notepad.toml"
    f.write_bytes(b"\xef\xbb\xbf" + config_to_toml(TrainConfig(seed=7)).encode())
    assert read_config_file(f)["seed"] == 7
    assert load_config(f) == TrainConfig(seed=7)


def test_a_folder_given_as_the_config_file_is_called_a_folder(tmp_path: Path) -> None:
    (tmp_path / "configs.toml").mkdir()
    with pytest.raises(ConfigError, match=r"configs\.toml is a folder, not a file") as err:
        read_config_file(tmp_path / "configs.toml")
    assert "no such file" not in str(err.value)
