"""What every stage runs in: the study, its store, the output folder, the console and the executor."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from pareto_atlas.measure.consent import Consent, authorize
from pareto_atlas.measure.resolve import load_study  # a study read with the checks that read this host
from pareto_atlas.measure.weights import ModelError
from pareto_atlas.scale import Executor, InProcess, executor_for
from pareto_atlas.spec.study import Study, StudyError
from pareto_atlas.store import Store, StoreError

USER_ERRORS: tuple[type[BaseException], ...] = (StudyError, StoreError, ModelError, ValueError, FileNotFoundError)


@dataclass
class Context:
    study: Study
    out: Path
    store: Store
    console: Console
    executor: Executor = field(default_factory=InProcess)
    consent: Consent | None = None  # what the user allowed the study (None: their config file alone)

    @classmethod
    def open(
        cls,
        study: str,
        out: Path | None,
        console: Console,
        ray: str | None = None,
        store: Path | None = None,
        consent: Consent | None = None,
    ) -> "Context":
        s = load_study(study)
        out = Path(out) if out else Path("atlas-out") / s.name
        out.mkdir(parents=True, exist_ok=True)
        executor = executor_for(ray)  # first: an unreachable cluster fails before the store is opened
        return cls(s, out, Store(store or default_store(s, out)), console, executor, consent)

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc) -> None:
        self.store.close()
        self.executor.close()


def default_store(study: Study, out: Path) -> Path:
    """<out>/store.duckdb; a study that compares with another (`compare_with`) shares that study's
    store (atlas-out/<its name>/store.duckdb) unless --out is given, so both engines' anchors meet."""
    if study.compare_with and out == Path("atlas-out") / study.name:
        return Path("atlas-out") / load_study(study.compare_with).name / "store.duckdb"
    return out / "store.duckdb"


def needs_arms(ctx: Context, stage: str) -> None:
    if not ctx.study.measures:
        raise StudyError(
            f"{stage}: study {ctx.study.name!r} has no [[arms]], nothing to run on an engine; "
            f"`build` runs simulate, atlas and report on published evidence"
        )


def consented(ctx: Context) -> None:
    """Refuse a study that asks for what the user has not allowed before anything is printed or
    started; the campaigns check again (for callers of the library) and print what goes where."""
    authorize(ctx.study, ctx.consent if ctx.consent is not None else Consent.from_user())
