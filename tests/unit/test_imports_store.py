"""Imported files in the store: one transaction, idempotent, provenance and the file kept; the
points table flags them by origin; the project's own anchors exported to vLLM's and GuideLLM's
formats read back with the same TTFT and TPOT; a peer's GPU results calibrate the card they name."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from pareto_atlas.measure.imports import ImportFileError, import_paths, read_result
from pareto_atlas.measure.imports.export import export_peer
from pareto_atlas.measure.metrics import derive_metrics
from pareto_atlas.measure.records import RequestRecord
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps, now

D = Path(__file__).resolve().parents[1] / "data" / "imports"
LAMBDA = [
    D / n
    for n in (
        "vllm_legacy_detailed_llama3-8b_h100sxm_len2048.json",
        "vllm_legacy_detailed_llama3-8b_h100sxm_len4096.json",
    )
]


def _counts(s: Store) -> tuple[int, int, int, int]:
    return tuple(
        s.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("anchors", "requests", "import_files", "imported_quality")
    )


def test_import_writes_anchors_provenance_and_the_file_once(tmp_path):
    with Store(tmp_path / "s.duckdb") as s:
        out = import_paths(
            s,
            "peer",
            LAMBDA + [D / "lm_eval_results_mmlu_abstract_algebra.json"],
            hardware="H100-SXM",
            model="llama-3-8b",
        )
        assert [o.status for o in out] == ["imported"] * 3
        assert _counts(s) == (2, 20, 3, 1)
        a = s.anchors("peer").iloc[0]
        prov = json.loads(a.provenance_json)
        sha = hashlib.sha256(LAMBDA[0].read_bytes()).hexdigest()
        assert prov["source"] == f"imported:vllm-bench@benchmark_serving+detailed:{sha}"
        assert prov["contract"] == "unverified" and prov["original"]["ttft.p50"]["method"]
        assert (a.hardware, a.model, a.engine, a.status) == ("H100-SXM", "llama-3-8b", "vllm", "ok")
        blob = s.con.execute("SELECT content FROM import_files WHERE sha256 = ?", [sha]).fetchone()[0]
        assert bytes(blob) == LAMBDA[0].read_bytes()
        # the same files again change nothing
        again = import_paths(s, "peer", LAMBDA, hardware="H100-SXM", model="llama-3-8b")
        assert [o.status for o in again] == ["already imported"] * 2 and _counts(s) == (2, 20, 3, 1)


def test_one_bad_file_imports_nothing(tmp_path):
    with Store(tmp_path / "s.duckdb") as s:
        with pytest.raises(ImportFileError, match="completed"):
            import_paths(s, "peer", [LAMBDA[0], D / "vllm_0.25.1_all_requests_failed.json"])
        assert _counts(s) == (0, 0, 0, 0)
        with pytest.raises(ImportFileError, match="--hardware 'H999'"):
            import_paths(s, "peer", LAMBDA, hardware="H999")


def test_a_failed_write_rolls_the_whole_import_back(tmp_path, monkeypatch):
    from pareto_atlas.measure.imports import write

    real = write.anchor_row
    calls = []

    def second_fails(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return real(*a, **k)

    monkeypatch.setattr(write, "anchor_row", second_fails)
    with Store(tmp_path / "s.duckdb") as s:
        with pytest.raises(RuntimeError):
            import_paths(s, "peer", LAMBDA)
        assert _counts(s) == (0, 0, 0, 0)


def test_imported_anchors_are_points_flagged_by_origin(tmp_path):
    from pareto_atlas.spec.study import load_study
    from pareto_atlas.store.points import measured_points

    study = load_study("tiny")
    with Store(tmp_path / "s.duckdb") as s:
        import_paths(s, study.name, LAMBDA[:1], hardware="H100-SXM", model="llama-3-8b")
        pts = measured_points(study, s)
    (p,) = pts.itertuples()
    assert p.provenance == "measured" and p.origin.startswith("imported:vllm-bench@")
    assert p.hardware == "H100-SXM" and p.ttft_p50_ms == pytest.approx(62.1947320032632)
    assert "H100" in p.price_date or p.price_per_hour > 1.0  # the card's price, not this CPU's
    # the study's model is not the peer's: no quality of the study's attaches to the peer's point
    assert p.quality != p.quality and p.quality_provenance == "none: imported anchor of llama-3-8b"


def _own_anchor(s: Store, rng: np.random.Generator, conc: int) -> str:
    """An anchor as the project's campaign writes it: raw records, metrics derived from them."""
    recs, t = [], 0.0
    for i in range(40):
        send = t + rng.uniform(0, 0.2)
        first = send + rng.uniform(0.05, 0.3)
        chunks = first + np.cumsum(np.r_[0.0, rng.uniform(0.01, 0.03, 31)])
        recs.append(
            RequestRecord(
                idx=i,
                warmup=False,
                send_ts=send,
                chunk_ts=tuple(chunks),
                first_token_ts=first,
                end_ts=chunks[-1] + rng.uniform(0, 0.004),
                prompt_tokens=128,
                completion_tokens=32,
                ok=True,
            )
        )
        t = send
    m = derive_metrics(recs, 128, 32)
    aid = f"own{conc}"
    s.put_anchor(
        {
            "anchor_id": aid,
            "study": "own",
            "arm": f"c{conc}",
            "repeat": 0,
            "status": "ok",
            "reason": None,
            "knobs_json": dumps({}),
            "workload_json": dumps({"name": "w", "prompt_tokens": 128, "output_tokens": 32}),
            "load_json": dumps({"requests": 40, "concurrency": conc, "rate_rps": None}),
            "model": "qwen2.5-0.5b",
            "engine": "llama.cpp",
            "hardware": "this-cpu",
            "metrics_json": dumps(m.to_dict()),
            "provenance_json": dumps({}),
            "started_at": now(),
            "finished_at": now(),
        },
        [r.to_dict() for r in recs],
    )
    return aid


@pytest.mark.parametrize("fmt", ["vllm-bench", "guidellm"])
def test_own_anchors_exported_and_imported_back_keep_ttft_and_tpot(tmp_path, fmt):
    rng = np.random.default_rng(7)
    with Store(tmp_path / "s.duckdb") as s:
        ids = [_own_anchor(s, rng, c) for c in (1, 4)]
        paths = export_peer(s, "own", tmp_path / fmt, fmt)
        assert len(paths) == 2
        for aid, p in zip(ids, paths):
            m = json.loads(s.anchors("own").set_index("anchor_id").loc[aid].metrics_json)
            (a,) = read_result(p, strict=True).anchors
            for metric in ("ttft", "tpot"):
                for stat in ("p50", "p90", "p99", "mean"):
                    assert a.metrics[metric][stat] == pytest.approx(m[metric][stat], rel=1e-9), (fmt, metric, stat)
            if fmt == "guidellm":  # the project's own export states the contract it ran under
                assert a.contract == "verified"


def test_a_peers_gpu_results_calibrate_the_card_they_name(tmp_path):
    lines = []

    class Capture(Console):
        def print(self, *a, **k):
            lines.append(" ".join(str(x) for x in a))

    from pareto_atlas.calibrate.imported import calibrate_imported

    with Store(tmp_path / "s.duckdb") as s:
        import_paths(s, "fresh", LAMBDA, hardware="H100-SXM", model="llama-3-8b", engine="vllm")
        # the files cannot show the token contract (ShareGPT lengths): left out unless asked
        assert calibrate_imported("fresh", s, Capture()) == 0
        assert calibrate_imported("fresh", s, Capture(), allow=("unverified",)) == 1
        cal = s.calibrations("fresh")
    params = json.loads(cal.params_json.iloc[-1])
    assert cal.hardware.iloc[-1] == "H100-SXM" and cal.n_anchors.iloc[-1] == 2
    assert params["provenance"].startswith("calibrated on 2 imported anchors (vllm: import-")
    assert "leave-one-source-out" in params["provenance"] and 0 < params["lat_rel_err"] < 5
    fid = json.loads(cal.fidelity_json.iloc[-1])
    held = fid["published"]
    # the fidelity report shows the fit at each imported anchor, with its held-out error and origin
    rows = [r for r in fid["anchors"] if r["metric"] == "ttft_p50_ms"]
    assert len(rows) == 2 and all(r["origin"].startswith("imported:vllm-bench@") for r in rows)
    assert rows[0]["measured"] == pytest.approx(62.1947320032632) and np.isfinite(rows[0]["loo_rel_err"])
    assert np.isfinite(held["errors"]["TTFT"]) and np.isfinite(held["errors"]["throughput"])
    assert any("held-out (leave-one-source-out) median |error|: TTFT" in ln for ln in lines)
    # simulate reads the card's fit from where published fits are kept
    from pareto_atlas.calibrate.published_stage import stored_published

    with Store(tmp_path / "s.duckdb") as s:
        assert stored_published(s, "fresh")["H100-SXM"].provenance == params["provenance"]


def test_cli_import_then_export_in_a_peer_format(tmp_path):
    from typer.testing import CliRunner

    from pareto_atlas.cli import app

    out = tmp_path / "out"
    args = [
        "import",
        *map(str, LAMBDA),
        "--study",
        "tiny",
        "--out",
        str(out),
        "--hardware",
        "H100-SXM",
        "--model",
        "llama-3-8b",
        "--allow-unverified",
    ]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "vllm-bench@benchmark_serving+detailed" in r.output and "calibrated on 2 imported anchors" in r.output
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and again.output.count("already imported") == 2
    bad = CliRunner().invoke(
        app, ["import", str(D / "sglang_llama33_70b_online_h200.jsonl"), "--study", "tiny", "--out", str(out)]
    )
    assert bad.exit_code == 2 and "random_range_ratio" in bad.output and "Traceback" not in bad.output
    # the calibrate stage fits the imported card too; a study with no anchors of this machine stops there
    r = CliRunner().invoke(app, ["calibrate", "--study", "tiny", "--out", str(out), "--allow-unverified"])
    assert r.exit_code == 0 and "H100-SXM / vllm: calibrated on 2 imported anchors" in r.output, r.output
    r = CliRunner().invoke(app, ["calibrate", "--study", "tiny", "--out", str(out)])
    assert r.exit_code == 2 and "left out of the fit, contract unverified" in r.output, r.output
    with Store(out / "store.duckdb") as s:  # one anchor of the study's own beside the imported ones
        _own_anchor(s, np.random.default_rng(3), 2)
        s.con.execute("UPDATE anchors SET study = 'tiny' WHERE anchor_id = 'own2'")
    r = CliRunner().invoke(app, ["export", "--study", "tiny", "--out", str(out), "--format", "vllm-bench"])
    assert r.exit_code == 0, r.output
    files = sorted((out / "export" / "vllm-bench").glob("*.json"))  # the own anchor only, not the peer's
    assert [p.name for p in files] == ["own2.vllm-bench.json"] and read_result(files[0]).tool == "vllm-bench"


def test_knobs_named_by_the_importer(tmp_path):
    from pareto_atlas.stages import _knobs

    k = _knobs("weights=FP8,kv=fp8,slots=8")
    assert (k.weights, k.kv, k.slots) == ("FP8", "fp8", 8)
    with pytest.raises(ValueError, match="knobs.weights: 'FP9'"):
        _knobs("weights=FP9")
    with pytest.raises(ValueError, match="name=value"):
        _knobs("FP8")
    with Store(tmp_path / "s.duckdb") as s:
        import_paths(s, "peer", LAMBDA[:1], knobs=k)
        assert json.loads(s.anchors("peer").knobs_json.iloc[0])["weights"] == "FP8"
