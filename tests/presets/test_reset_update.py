"""Every preset with PEBBLE's pre-training takes its authors' 100 gradient updates after the
critic reset: ``reset_update: 100`` in B-Pref's config/train_PEBBLE.yaml (its PEBBLE presets),
QPA's config/train_QPA.yaml and SURF's config/train_PEBBLE_semi_dataaug.yaml."""

import pytest

from preflab.config.file import load_config
from preflab.presets import preset_names, preset_path

PRETRAINED = sorted(n for n in preset_names() if load_config(preset_path(n)).unsup_steps)


def test_the_pretrained_presets_are_the_pebble_qpa_and_surf_ones() -> None:
    assert "qpa/walker_walk" in PRETRAINED and "surf/walker_walk" in PRETRAINED
    assert {n for n in PRETRAINED if n.startswith("bpref/")} == {
        n for n in preset_names() if n.startswith("bpref/") and "-pebble" in n
    }


@pytest.mark.parametrize("name", PRETRAINED)
def test_a_pretrained_preset_updates_100_times_after_the_critic_reset(name: str) -> None:
    assert load_config(preset_path(name)).reset_updates == 100
