"""The published MoE fit as the commands use it: printed by `calibrate --published --multi-gpu`
(moe_study), and applied to the GPU cards' calibrations for a space with a mixture of experts
(with_moe_fits, from published_stage.published_params)."""

from __future__ import annotations

from rich.console import Console

from pareto_atlas.calibrate.published import CardCalibration
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.spec.cards import shipped_hardware


def with_moe_fits(
    have: dict[str, CalibParams], cards: list[str], console: Console, cals: list[CardCalibration] | None = None
) -> dict[str, CalibParams]:
    """The cards' calibrations with each card's MoE terms fitted on the published MoE rows
    (calibrate.published_moe), so MoE points use them and carry their held-out bar."""
    from pareto_atlas.calibrate.published_moe import moe_calibrations, with_moe

    hw = shipped_hardware()
    fits = moe_calibrations([c for c in cards if c in hw and hw[c].kind != "cpu"], one_gpu=cals)
    out = dict(have)
    for c, fit in fits.items():
        out[c] = with_moe(out.get(c) or default_params(hw[c], "vllm"), fit)
        console.print(f"  {c}: {fit.provenance()}", highlight=False, soft_wrap=True)
    return out


def moe_study(
    console: Console, hardware: list[str] | None = None, one_gpu: list[CardCalibration] | None = None
) -> list:
    """Fit the shipped MoE table per card and print its held-out error (calibrate.published_moe)."""
    from pareto_atlas.calibrate import published_moe
    from pareto_atlas.calibrate.published_moe_table import load_moe

    moe = load_moe()
    console.print(
        f"[bold]published, mixtures of experts[/]: {len(moe.rows)} rows ({', '.join(moe.paths)}, sha256 "
        f"{moe.sha256[:12]}; {', '.join(dict.fromkeys(moe.rows.model))})",
        highlight=False,
        soft_wrap=True,
    )
    for sid, g in moe.rows.groupby("source_id", sort=False):
        console.print(
            f"  {sid}: {len(g)} rows ({', '.join(dict.fromkeys(g.model))}) published:{g.source.iloc[0]}",
            highlight=False,
            soft_wrap=True,
        )
    cards = [g for g in dict.fromkeys(moe.rows.gpu) if not hardware or g in hardware]
    fits = published_moe.moe_calibrations(cards, moe, one_gpu)
    console.print(
        "\n".join(published_moe.report_lines(list(fits.values()))), markup=False, highlight=False, soft_wrap=True
    )
    return list(fits.values())
