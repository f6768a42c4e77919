"""lm-evaluation-harness `results_*.json`: task scores as quality evidence (score, items, stderr
and the generation settings), for the configuration the importer names.

Metric keys are the harness's `metric,filter` (e.g. `acc,none`, `exact_match,strict-match`), kept
as written; the stderr beside each is the harness's (`acc_stderr,none`, "N/A" where none). A task
scored on fewer items than it has (`n-samples` effective < original, i.e. `--limit`) is a partial
evaluation and rejects the file. `config.model_args` is the `--model_args` text ("pretrained=x,...")
up to 0.4.8, and an object ({"pretrained": "x", ...}) from 0.4.9 on (and whenever the harness is
called from Python with a dict); both are kept as written, the model named from `pretrained`.
"""

from __future__ import annotations

from pareto_atlas.measure.imports.parse import Fields
from pareto_atlas.measure.imports.result import ImportFileError, QualityEvidence, reject


def is_results(obj: object) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("results"), dict)
        and ("n-samples" in obj or "configs" in obj or "versions" in obj)
    )


def version(obj: dict) -> str:
    v = obj.get("lm_eval_version")
    if isinstance(v, str) and v:
        return v
    h = obj.get("git_hash")
    return f"git {h}" if isinstance(h, str) and h else "unknown"


def _model(cfg: Fields) -> str | None:
    """The model the run names: the model_args text, or its `pretrained` (`model`) entry when an object."""
    args = cfg.raw("model_args")
    if isinstance(args, dict):
        sub = Fields(cfg.path, args, cfg.name("model_args"))
        return sub.text("pretrained") or sub.text("model") or cfg.text("model")
    return cfg.text("model_args") or cfg.text("model")


def parse(path: str, data: dict) -> tuple[str, list[QualityEvidence], str | None]:
    f = Fields(path, data)
    results = f.sub("results")
    samples = f.sub("n-samples", required=False)
    shots = f.sub("n-shot", required=False)
    configs = f.sub("configs", required=False)
    cfg = f.sub("config", required=False)
    model = _model(cfg) if cfg else None
    run = (
        {
            k: cfg.raw(k)
            for k in ("model", "model_args", "batch_size", "limit", "gen_kwargs", "random_seed")
            if cfg and cfg.has(k)
        }
        if cfg
        else {}
    )
    out = []
    for task in results.obj:
        r = results.sub(task)
        n = n_orig = None
        if samples and samples.has(task):
            s = samples.sub(task)
            n, n_orig = s.integer("effective", required=True), s.integer("original")
            if n_orig is not None and n < n_orig:
                raise reject(
                    path,
                    f"n-samples.{task}.effective",
                    f"{n} of {n_orig} items: a partial evaluation (--limit), not the task's score",
                )
        if n == 0:
            raise reject(path, f"n-samples.{task}.effective", "0 items scored")
        tc = configs.sub(task, required=False) if configs and configs.has(task) else None
        settings = {
            "n_shot": shots.raw(task) if shots else None,
            **run,
            "generation_kwargs": tc.raw("generation_kwargs") if tc else None,
            "output_type": tc.raw("output_type") if tc else None,
        }
        for key in r.obj:
            if "," not in key or "_stderr," in key or key == "alias":
                continue
            value = r.number(key, minimum=None)
            if value is None:
                continue
            metric, filt = key.split(",", 1)
            se_raw = r.raw(f"{metric}_stderr,{filt}")
            se = r.number(f"{metric}_stderr,{filt}") if isinstance(se_raw, (int, float)) else None
            if n is None:
                raise reject(path, f"n-samples.{task}", "missing: the number of items scored is not in the file")
            out.append(
                QualityEvidence(
                    task=task, metric=key, value=value, stderr=se, n=n, n_original=n_orig, settings=settings
                )
            )
    if not out:
        raise ImportFileError(f"{path}: field 'results': no task score in the file")
    return version(data), out, model
