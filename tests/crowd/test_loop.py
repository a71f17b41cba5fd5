import numpy as np
import pytest

from preflab.aggregate import SMLAggregator
from preflab.config import TrainConfig
from preflab.crowd import CrowdConfig, CrowdSource
from preflab.runs import train


@pytest.mark.slow
def test_crowd_source_and_sml_aggregator_drive_the_core_loop(tmp_path):
    cfg = TrainConfig.smoke(total_labels=40, segment_length=25, pool_size=100)
    crowd = CrowdSource(CrowdConfig(n_users=7, answer_rate=0.7), np.random.default_rng(0))
    agg = SMLAggregator()
    summary = train(cfg, run_dir=tmp_path, source=crowd, aggregator=agg)
    assert summary.n_labels >= 30
    assert agg.last_sml is not None and agg.last_sml.weights.shape == (7,)
