"""The published MoE fit alone (calibrate.published_moe.calibrate_moe, as `pareto-atlas calibrate --published
--multi-gpu` runs it), for before/after comparisons of MoE-only code on one machine:

    python scripts/moe_refit.py DENSE.pkl [TABLE.csv | -] [ANCHORS_OUT.csv] [--nproc N] [--trtllm-budget]
        [--rules-budget] [--pred-cache DIR] [--host-serial] [--host-only] [--moe-law on|off|leave-shape-out]
        [--fp8-per-tensor fp8_block|fp8] [--adp-busiest-rank]
        [--adp-rank-budget]

DENSE.pkl holds each card's one-GPU published fits and its link fit (published_moe.dense_fits: a card the
one-GPU table lacks, B200, fitted on its one-GPU rows of the multi-GPU table; computed and written on the
first call, then reused): they are fitted on dense rows, so code that only changes MoE or sliding-window cards leaves
them as they are, and a before/after pair (PYTHONPATH at two checkouts) shares them. TABLE: an MoE table
(default: the shipped spec/published_moe.csv). --nproc: the grid points over N forked processes (the same
rows, seeds and numbers). --trtllm-budget: a choice tried, not the product's: TensorRT-LLM rows run with the
per-step token budget aiconfigurator's config generator sets for an aggregated worker (max batch + ISL +
1500, block-rounded: ai-dynamo/aiconfigurator .claude/rules/generator/rule_authoring.md) instead of
TensorRT-LLM's default max_num_tokens 8192, which admits no 8192-token prompt beside a running decode.
--moe-law: simulate.moe_law.MODE (default the product's, on): off prices every MoE layer by the cost model's
own terms (the before of a before/after on one commit); leave-shape-out prices each model's layers by the law
fitted without its own shape's operator rows.
--fp8-per-tensor: simulate.moe_law.PER_TENSOR_FP8 (with a law
on: Mixtral's FP8 experts by the block-FP8 law, the default, or by the per-tensor tables).
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import time
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from pareto_atlas.calibrate import published_moe, published_runs
from pareto_atlas.calibrate.published_moe_table import load_moe
from pareto_atlas.simulate import cost_model, moe_law
from pareto_atlas.spec.cards import shipped_hardware

CARDS = ["H100-SXM", "H200", "B200"]
_ARGS: tuple = ()


def _grid_point(g: int) -> np.ndarray:
    return published_moe.grid_point_errors(g, *_ARGS)


def _parallel(nproc: int):
    def predictions(frame, models, hw, base, engines, runs=None):
        global _ARGS
        _ARGS = (frame, models, hw, base, engines, [None] * len(frame) if runs is None else runs)
        with get_context("fork").Pool(nproc) as pool:
            return np.stack(pool.map(_grid_point, range(len(published_moe.GRID)), chunksize=1))

    return predictions


def _cached(inner, folder: Path):
    """`predictions` kept per card in `folder`, keyed by everything they are a function of (the rows'
    frame, models, card, each engine's dense params, runs, the grid and the code): a before/after pair
    whose change touches one card's dense costs simulates the other cards once."""
    from importlib import resources

    from pareto_atlas.calibrate import published_cache

    # the code they run: the simulator, and the fit's prediction of a row (not this file's callers)
    h = hashlib.sha256()
    published_cache._hash_tree(h, resources.files("pareto_atlas.simulate"), "")
    for f in ("fit.py", "anchors.py", "published_runs.py"):
        h.update(resources.files("pareto_atlas.calibrate").joinpath(f).read_bytes())
    _code = h.hexdigest()

    def predictions(frame, models, hw, base, engines, runs=None):
        what = pickle.dumps(
            (
                frame.to_csv(index=False),
                [m.name for m in models],
                hw.name,
                sorted((e, repr(p)) for e, p in base.items()),
                list(engines),
                repr(runs),
                published_moe.GRID,
                _code,
                moe_law.MODE,
                cost_model.ADP_BUSIEST_RANK,
                moe_law.PER_TENSOR_FP8,
                moe_law.operator_table().to_csv(index=False) if moe_law.MODE != "off" else "",
            )
        )
        path = folder / f"{hw.name}-{hashlib.sha256(what).hexdigest()[:20]}.npy"
        if path.exists():
            print(f"  {hw.name}: predictions from {path}", flush=True)
            return np.load(path)
        err = inner(frame, models, hw, base, engines, runs)
        folder.mkdir(parents=True, exist_ok=True)
        np.save(path, err)
        return err

    return predictions


def _trtllm_budget() -> None:
    orig = published_moe._policy

    def policy(r, hw):
        p = orig(r, hw)
        if p and r["engine"] == "trtllm":
            need = int(r["load_value"]) + int(r["prompt_tokens"]) + 1500
            return p[0], max(p[1], -(-need // 32) * 32), p[2]
        return p

    published_moe._policy = policy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dense", type=Path)
    ap.add_argument("table", nargs="?", default="-")
    ap.add_argument("anchors_out", nargs="?", type=Path)
    ap.add_argument("--nproc", type=int, default=1)
    ap.add_argument("--trtllm-budget", action="store_true")
    ap.add_argument(
        "--rules-budget", action="store_true", help="vLLM rows before 0.12 on the rules' budget (as before 8ebf994)"
    )
    ap.add_argument("--pred-cache", type=Path, help="keep each card's grid predictions here (see _cached)")
    ap.add_argument(
        "--host-serial",
        action="store_true",
        help="every row's host work serial, whatever its engine release (as before calibrate.published."
        "HOST_OVERLAP_BY_RELEASE)",
    )
    ap.add_argument(
        "--host-only",
        action="store_true",
        help="a host-overlapped row's step cost only: its batches admitted as without the overlap (a choice "
        "tried, not the product's: calibrate.anchors._overlaid)",
    )
    ap.add_argument("--moe-law", choices=moe_law.MODES, default=moe_law.MODE, help="simulate.moe_law.MODE")
    ap.add_argument(
        "--fp8-per-tensor",
        choices=moe_law.PER_TENSOR_FP8_CHOICES,
        default=moe_law.PER_TENSOR_FP8,
        help="simulate.moe_law.PER_TENSOR_FP8: the table a per-tensor FP8 card's experts are priced by",
    )
    ap.add_argument(
        "--adp-busiest-rank",
        action="store_true",
        help="simulate.cost_model.ADP_BUSIEST_RANK (a choice tried, off in the product): an attention-DP step that "
        "prefills lasts as long as the rank holding its prompts",
    )
    ap.add_argument(
        "--adp-rank-budget",
        action="store_true",
        help="calibrate.published_runs.ADP_RANK_BUDGET (a choice tried, off in the product): a TensorRT-LLM "
        "attention-DP row's token budget is its ranks' own, each from the rank's batch",
    )
    a = ap.parse_args()
    cost_model.ADP_BUSIEST_RANK = a.adp_busiest_rank
    published_runs.ADP_RANK_BUDGET = a.adp_rank_budget
    moe_law.MODE = a.moe_law
    moe_law.PER_TENSOR_FP8 = a.fp8_per_tensor
    if a.host_only:
        from pareto_atlas.calibrate import anchors

        anchors._overlaid = lambda k: k
    if a.host_serial:
        from pareto_atlas.calibrate import published

        published.HOST_OVERLAP_BY_RELEASE = False
    t0 = time.time()
    if a.nproc > 1:
        published_moe.predictions = _parallel(a.nproc)
    if a.rules_budget:
        published_moe.vllm_default_budget = lambda frame, rows, runs, hw: (frame, runs)
    if a.pred_cache:
        published_moe.predictions = _cached(published_moe.predictions, a.pred_cache)
    if a.trtllm_budget:
        _trtllm_budget()
    table = load_moe([Path(a.table)], shipped=False) if a.table != "-" else load_moe()
    if a.dense.exists():
        dense = pickle.loads(a.dense.read_bytes())
        ones, links, own = dense if len(dense) == 3 else (*dense, {})  # a pickle of before B200's own fit
    else:
        ones, links, own = published_moe.dense_fits(CARDS)
        a.dense.write_bytes(pickle.dumps((ones, links, own)))
    cards = [c for c in dict.fromkeys(table.rows.gpu) if c in shipped_hardware()]
    bases, said = published_moe.dense_bases(table, cards, ones, links, own)
    print(f"table sha256 {table.sha256[:12]}, {len(table.rows)} rows", flush=True)
    fits = published_moe.calibrate_moe(table, bases, said)
    print("\n".join(published_moe.report_lines(list(fits.values()))))
    if a.anchors_out:
        import pandas as pd

        pd.concat([f.anchors.assign(gpu=c) for c, f in fits.items()]).to_csv(a.anchors_out, index=False)
    print(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
