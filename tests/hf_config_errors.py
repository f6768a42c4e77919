"""A model card read from a bad config.json, for the tests of the cards' one-line errors (test_moe_cards,
test_moe_memory): one of tests/data/hf_configs with some fields changed, and the CardError it raises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pareto_atlas.spec.cards import CardError, model_card_from_hf_config

CONFIGS = Path(__file__).parent / "data" / "hf_configs"
DROP = object()  # a field taken out of the config


def config_error(tmp_path: Path, base: str, **changes) -> str:
    """The error reading fixture `base`'s config.json with `changes` gives: a value replaces its field (None
    included), DROP takes it out, a dict is merged into a dict field (quantization_config); the message
    must be one line."""
    cfg = json.loads((CONFIGS / f"{base}.json").read_text())
    for k, v in changes.items():
        if v is DROP:
            cfg.pop(k, None)
        elif isinstance(v, dict) and isinstance(cfg.get(k), dict):
            cfg[k] = {**cfg[k], **v}
        else:
            cfg[k] = v
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(CardError) as e:
        model_card_from_hf_config(p)
    msg = str(e.value)
    assert "\n" not in msg
    return msg
