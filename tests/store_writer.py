"""Processes that write a store, for the damage and contention tests (run as a script):

store_writer.py campaign OUT ARMS [TOKEN_S [GATE]]
                                              `pareto-atlas measure` through the CLI against an
                                              OpenAI-compatible test server (measure.fakeserver; the
                                              model file is not needed: served_model is replaced);
                                              with GATE, every arm after the first waits until that
                                              file exists, so the store stays open for writing while
                                              a test does what it must beside it;
                                              the server on $STORE_WRITER_PORT where set
store_writer.py anchors STORE N RECORDS       N anchors of RECORDS request records each, straight
                                              through Store.put_anchor, printing "saved i" after each
"""

from __future__ import annotations

import sys
from pathlib import Path

STUDY = """
name = "faults"
[model]
name = "smollm2-135m-instruct"
card = "smollm2-135m"
[engine]
name = "openai"
base_url = "{url}"
options = {{check = false}}
[workload]
prompt_tokens = 48
output_tokens = 24
[load]
requests = 6
warmup = 0
"""


def campaign(out: Path, arms: int, token_s: float, gate: Path | None = None) -> int:
    import time

    from pareto_atlas import cli
    from pareto_atlas.measure import campaign as c
    from pareto_atlas.measure.fakeserver import FakeBehaviour, FakeOpenAIServer

    def served_model(study, arm):
        deadline = time.monotonic() + 300
        while gate is not None and arm.name != "a0" and not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return Path("fake.gguf"), "0" * 64, 1, 4.5

    class OnPort(FakeOpenAIServer):
        """On $STORE_WRITER_PORT where it is set: a rerun's study (its anchors) names the same server."""

        def _run(self) -> None:
            import asyncio
            import os

            asyncio.set_event_loop(self._loop)
            port = int(os.environ.get("STORE_WRITER_PORT", "0"))
            self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", port))
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()
            self._loop.run_forever()

    c.served_model = served_model
    with OnPort(FakeBehaviour(prefill_s=0.002, token_s=token_s)) as srv:
        study = out / "faults.toml"
        out.mkdir(parents=True, exist_ok=True)
        study.write_text(
            STUDY.format(url=srv.base_url)
            + "".join(f'[[arms]]\nname = "a{i}"\nweights = "Q4_1"\n' for i in range(arms))
        )
        # the CLI as a user runs it; without standalone mode click returns the exit code of typer.Exit
        return int(cli.app(["measure", "--study", str(study), "--out", str(out)], standalone_mode=False) or 0)


def anchors(store: Path, n: int, records: int) -> int:
    from pareto_atlas.store import Store
    from pareto_atlas.store.db import now

    with Store(store) as s:
        for i in range(n):
            row = {
                "anchor_id": f"w{i}",
                "study": "faults",
                "arm": f"a{i}",
                "repeat": 0,
                "status": "ok",
                "reason": None,
                "knobs_json": "{}",
                "metrics_json": "{}",
                "started_at": now(),
                "finished_at": now(),
            }
            s.put_anchor(row, [{"idx": j, "ok": True, "text": "x" * 200} for j in range(records)])
            print(f"saved {i}", flush=True)
    return 0


if __name__ == "__main__":
    kind, args = sys.argv[1], sys.argv[2:]
    if kind == "campaign":
        sys.exit(
            campaign(
                Path(args[0]),
                int(args[1]),
                float(args[2]) if len(args) > 2 else 0.0,
                Path(args[3]) if len(args) > 3 else None,
            )
        )
    sys.exit(anchors(Path(args[0]), int(args[1]), int(args[2])))
