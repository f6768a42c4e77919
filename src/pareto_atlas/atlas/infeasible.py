"""Why configurations were infeasible, per (model, card): the distinct reasons the simulator gave
(simulate.memory) with how many configurations each ruled out, so that an empty or thin atlas says
what to change ("TP x PP >= 2 on 80 GiB cards") instead of nothing."""

from __future__ import annotations

from dataclasses import dataclass

import re

import pandas as pd

from pareto_atlas.atlas.winners import model_column


# simulate.memory names the layout that was tried ("... weights at tp 2 x pp 1 (70.6 GB per GPU), over ...");
# the summary counts the weights that do not fit once, whatever layouts were tried, its fix names the least
_LAYOUT_TRIED = re.compile(r" at tp \d+ x pp \d+ \([\d.]+ GB per GPU\)")


def general(reason: str) -> str:
    """A reason without the layout it was found at, so one shortfall is one line."""
    return _LAYOUT_TRIED.sub("", reason)


@dataclass(frozen=True)
class Infeasible:
    model: str
    hardware: str
    n_infeasible: int  # configurations (distinct labels) infeasible under any workload
    n_configs: int  # configurations simulated on this (model, card)
    reasons: tuple[tuple[str, int], ...]  # (reason, configurations it ruled out), most first

    def lines(self, top: int = 4) -> list[str]:
        """The head line, then one line per reason (the `top` most frequent, then how many more)."""
        who = f"{self.model} on {self.hardware}" if self.model else self.hardware
        head = f"{self.n_infeasible} of {self.n_configs} configurations infeasible ({who})" + (
            ": none fits" if self.n_infeasible == self.n_configs else ""
        )
        out = [head] + [f"  {n} × {reason}" for reason, n in self.reasons[:top]]
        if len(self.reasons) > top:
            rest = sum(n for _, n in self.reasons[top:])
            out.append(f"  and {len(self.reasons) - top} more reason(s), {rest} configuration(s)")
        return out


def infeasible_summary(points: pd.DataFrame) -> list[Infeasible]:
    """One entry per (model, card) with at least one infeasible point; a configuration is its label
    (the knobs), counted once per reason whatever the workloads and loads it was simulated under."""
    if "feasible" not in points or "infeasible_reason" not in points or points.empty:
        return []
    pts = pd.DataFrame(
        {
            "model": model_column(points),
            "hardware": points["hardware"].astype(str).to_numpy(),
            "label": points["label"].astype(str).to_numpy(),
            "feasible": points["feasible"].fillna(True).astype(bool).to_numpy(),
            "reason": points["infeasible_reason"].fillna("").astype(str).to_numpy(),
        }
    )
    out = []
    for (m, hw), g in pts.groupby(["model", "hardware"], sort=False):
        bad = g[~g.feasible]
        if bad.empty:
            continue
        why = bad.assign(reason=bad.reason.where(bad.reason != "", "no reason recorded").map(general))
        counts = why.drop_duplicates(["reason", "label"]).reason.value_counts()
        reasons = tuple(sorted(((str(r), int(n)) for r, n in counts.items()), key=lambda rn: (-rn[1], rn[0])))
        out.append(Infeasible(str(m), str(hw), int(bad.label.nunique()), int(g.label.nunique()), reasons))
    return out
