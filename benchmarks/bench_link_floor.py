"""The link fit with published_link.MEASURED_FLOOR off and on, from one grid of simulations per card (the floor
changes which grid point each fold chooses, not the predictions): prints report_lines for each state and stores
each card's fit in the fit cache under that state's key, as link_calibrations would, so a later `calibrate`,
`build` or scripts/moe_refit.py run with the state set reads it instead of fitting again.

    PYTHONPATH=$PWD/src nice -n 19 .venv/bin/python benchmarks/bench_link_floor.py [CARD ...]
"""

from __future__ import annotations

import json
import os
import sys

from pareto_atlas.calibrate import published_cache
from pareto_atlas.calibrate import published_link as pl
from pareto_atlas.calibrate.published import for_atlas
from pareto_atlas.calibrate.published_cache import fit_key
from pareto_atlas.calibrate.published_table import load_multigpu, load_published

_memo: dict = {}
_predict = pl.predict_rows


def _predict_once(frame, models, hw, params, runs):
    key = (hw.name, tuple(frame.index), repr(params))
    if key not in _memo:
        _memo[key] = _predict(frame, models, hw, params, runs)
    return _memo[key]


def main(cards: list[str]) -> None:
    pl.predict_rows = _predict_once
    table, shipped = load_multigpu(), load_published()
    out = {False: [], True: []}
    for card in cards:
        one = published_cache.fitted(shipped, [card]) if card in set(shipped.rows.gpu) else []
        for state in (False, True):
            pl.MEASURED_FLOOR = state
            cal = pl.calibrate_link(
                table,
                card,
                {(c.hardware, c.engine): c.params for c in one},
                {g: c.params for g, c in for_atlas(one).items()},
            )
            out[state].append(cal)
            path = published_cache.cache_dir() / f"{pl._key(table, fit_key(shipped), card)}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(pl._encode(cal), default=lambda v: v.item()))
            os.replace(tmp, path)
        _memo.clear()
        for state in (False, True):
            print(f"MEASURED_FLOOR {'on' if state else 'off'}")
            print("\n".join(pl.report_lines(out[state][-1:])), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["H200", "H100-SXM", "B200"])
