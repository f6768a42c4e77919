"""What a study may make this tool do only because the user said so, outside the study file.

A study is shared (a team's file, one from an issue thread), so two of its fields are requests,
not orders:

- **a key to a host**: engine `openai` sends the value of the variable `api_key_env` names as a
  bearer token to `base_url`. The key goes only to a loopback host or to a host the user names
  (`--endpoint-host HOST`, or `endpoint_hosts` in the user's config), and only from a variable
  whose name looks like an API key (KEY_NAME_RULE) unless the user confirms the name
  (`--allow-key-env NAME`, or `key_envs` in the config). Requests without a key go where the study
  says: they carry nothing of the user's.
- **a program**: `binary` (llama.cpp, vLLM) and `python` (vLLM) in `engine.options` or an arm's
  `engine_options` name what is executed. Each is refused unless the user names that very program
  (`--allow-program PATH`, or `allowed_programs` in the config), compared after resolving PATH
  lookups and symbolic links.

`authorize` is the one check; the campaigns call it before any engine starts or any request is
sent (measure.campaign.run_campaign, quality.campaign.run_quality_campaign). The user's config is
`$XDG_CONFIG_HOME/pareto-atlas/config.toml` (default `~/.config/pareto-atlas/config.toml`): the
study file cannot write it, and nothing here reads a study's folder for consent.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from pareto_atlas.measure.launch_options import launch_extra

if TYPE_CHECKING:
    from pareto_atlas.spec.study import ArmSpec, Study

# A variable whose value may go as a bearer token without the user confirming its name: the
# conventions of inference endpoints. `*_TOKEN` and `*_KEY` alone are too wide (GITHUB_TOKEN,
# AWS_SECRET_ACCESS_KEY, NPM_TOKEN, AWS_SESSION_TOKEN), and so are names of other systems'
# credentials that happen to end like an API key (GITHUB_API_TOKEN, AWS_..._API_KEY).
KEY_SUFFIXES = ("_API_KEY", "_APIKEY", "_API_TOKEN")
KEY_NAMES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
FOREIGN_PREFIXES = (
    "AWS_",
    "AZURE_",
    "GCP_",
    "GOOGLE_CLOUD_",
    "GITHUB_",
    "GH_",
    "GITLAB_",
    "BITBUCKET_",
    "CI_",
    "NPM_",
    "PYPI_",
    "TWINE_",
    "DOCKER_",
    "SSH_",
    "GPG_",
    "VAULT_",
    "SLACK_",
    "CODECOV_",
)
KEY_NAME_RULE = (
    f"upper-case names ending {', '.join(KEY_SUFFIXES)}, or {', '.join(KEY_NAMES)}; "
    f"never one starting {', '.join(p.rstrip('_') for p in FOREIGN_PREFIXES)}"
)
LOOPBACK_RULE = "localhost, 127.0.0.0/8 or [::1]"
PROGRAM_KEYS = ("binary", "python")  # the engine options that name what is executed


def _show(value: object, most: int = 200) -> str:
    """A study's value in an error: quoted (so a newline cannot split the line) and bounded."""
    text = str(value)
    return repr(text if len(text) <= most else text[:most] + "...")


class ConsentError(ValueError):
    """A study asked for what the user has not allowed; one line naming the field and the way to allow it."""


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "pareto-atlas" / "config.toml"


def resolve_program(name: str) -> str | None:
    """The file that would run for `name`: a PATH lookup for a bare name (as subprocess does), the
    path itself otherwise, with symbolic links resolved; None when there is no such program."""
    try:
        found = shutil.which(name) if os.sep not in name else (name if os.path.isfile(name) else None)
        return os.path.realpath(found) if found else None
    except (OSError, ValueError):  # a NUL byte, a name too long: nothing that could run
        return None


def is_loopback(host: str) -> bool:
    # the host string itself, never a DNS answer: a name the study controls could resolve anywhere
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def key_like(name: str) -> bool:
    return (
        re.fullmatch(r"[A-Z][A-Z0-9_]*", name) is not None
        and not name.startswith(FOREIGN_PREFIXES)
        and (name in KEY_NAMES or name.endswith(KEY_SUFFIXES))
    )


def _host(value: str, field: str) -> str:
    """A host the user names, as base_url's host reads (lower case, no brackets); a port or a path is
    an error rather than an entry that silently matches nothing."""
    host = value.strip().lower()
    try:
        host = httpx.URL(host).host if "://" in host else host.strip("[]")
    except httpx.InvalidURL:
        host = ""
    if not re.fullmatch(r"[a-z0-9.\-:]+", host) or host.count(":") == 1:
        raise ConsentError(
            f"{field}: {_show(value, 60)} is not a host name without a port (e.g. api.example.com, 10.0.0.5 or ::1)"
        )
    return host


@dataclass(frozen=True)
class Consent:
    """What the user allowed, from the command line and their own config; empty allows loopback keys only."""

    endpoint_hosts: frozenset[str] = frozenset()
    key_envs: frozenset[str] = frozenset()
    programs: frozenset[str] = frozenset()  # resolved paths (resolve_program)

    @classmethod
    def from_user(
        cls,
        endpoint_hosts: Iterable[str] = (),
        key_envs: Iterable[str] = (),
        programs: Iterable[str] = (),
        config: Path | None = None,
    ) -> Consent:
        """The flags given, plus the user's config file when it exists. A flag naming no program is
        an error (a typo would otherwise allow nothing, silently); a config entry naming none is ignored."""
        cfg = read_config(config or config_path())
        progs = set()
        for p in programs:
            found = resolve_program(p)
            if found is None:
                raise ConsentError(
                    f"--allow-program: {_show(p)} is not a program on this host (a file path, or a name on PATH)"
                )
            progs.add(found)
        progs |= {r for r in map(resolve_program, cfg["allowed_programs"]) if r}
        return cls(
            frozenset(_host(h, "--endpoint-host") for h in endpoint_hosts) | cfg["endpoint_hosts"],
            frozenset(key_envs) | cfg["key_envs"],
            frozenset(progs),
        )


def read_config(path: Path) -> dict:
    """The user's allow-lists: endpoint_hosts, key_envs, allowed_programs (lists of strings)."""
    out: dict = {"endpoint_hosts": frozenset(), "key_envs": frozenset(), "allowed_programs": ()}
    if not path.is_file():
        return out
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConsentError(f"{path}: not readable TOML ({type(e).__name__}); fix or remove it") from None
    for key in out:
        v = raw.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ConsentError(f"{path}: {key} must be a list of strings")
        out[key] = (
            frozenset(_host(h, f"{path}: endpoint_hosts") for h in v)
            if key == "endpoint_hosts"
            else frozenset(v)
            if key == "key_envs"
            else tuple(v)
        )
    return out


def _where(study: Study, arm: ArmSpec, key: str) -> str:
    """The field a merged launch option came from (an arm's own wins, as in launch_extra)."""
    if key in arm.engine_options:
        return f"arms.{arm.name}.engine_options.{key}"
    return f"engine.options.{key}" if key in study.engine.options else f"engine.{key}"


def authorize(study: Study, consent: Consent) -> tuple[str, ...]:
    """Refuse (ConsentError) a study that would send a key or run a program the user has not
    allowed; otherwise the lines to print before the first request: which variable goes to which
    host, which program runs. Every arm is checked, whichever ones this run measures."""
    how = f"--endpoint-host HOST or endpoint_hosts in {config_path()}"
    lines: dict[str, None] = {}
    for where, opts in [("engine.options", study.engine.options)] + [
        (f"arms.{a.name}.engine_options", a.engine_options) for a in study.arms
    ]:
        for key in PROGRAM_KEYS:
            if not opts.get(key):
                continue
            value = str(opts[key])
            found = resolve_program(value)
            if found is None or found not in consent.programs:
                raise ConsentError(
                    f"{where}.{key}: {_show(value)} is a program the study would run; allowed only when "
                    f"you name that program: --allow-program PATH, or allowed_programs in {config_path()}"
                )
            lines[f"{study.engine.name}: runs {found} ({where}.{key}, a program you allowed)"] = None
    if study.engine.name != "openai":
        return tuple(lines)
    for arm in study.arms:
        extra = launch_extra(study, arm)
        env, url = extra.get("api_key_env"), str(extra.get("base_url") or "")
        if not env:
            continue
        f_env, f_url = _where(study, arm, "api_key_env"), _where(study, arm, "base_url")
        if not isinstance(env, str) or not (key_like(env) or env in consent.key_envs):
            name = env if isinstance(env, str) and re.fullmatch(r"\w{1,128}", env) else "NAME"
            raise ConsentError(
                f"{f_env}: {_show(env, 60)} is not allowed to be sent as a key: {KEY_NAME_RULE}; "
                f"or confirm the name with --allow-key-env {name} (or key_envs in {config_path()})"
            )
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError):
            raise ConsentError(f"{f_url}: {_show(url, 60)} is not an http(s) URL; ${env} is sent to none") from None
        if parsed.userinfo or "\\" in url:
            raise ConsentError(f"{f_url}: {_show(url, 60)} carries user info ('...@'); give the host alone")
        host = parsed.host.lower()
        if not (is_loopback(host) or host in consent.endpoint_hosts):
            raise ConsentError(
                f"{f_url}: host {_show(host, 60)} may not receive ${env} ({f_env}): a key goes only to "
                f"{LOOPBACK_RULE}, or to a host you name with {how}"
            )
        why = "loopback" if is_loopback(host) else "a host you allowed"
        lines[f"openai: ${env} goes as the bearer token to {host} ({why}; {f_env} -> {f_url})"] = None
    return tuple(lines)
