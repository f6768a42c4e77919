"""A study that cannot be used, as one line: the file, the dotted field and what is allowed."""

from __future__ import annotations

import re
import typing

from pydantic import BaseModel, ValidationError

from pareto_atlas.spec import bounds as B


class StudyError(ValueError):
    """The study file is missing, unreadable or invalid."""


_UNION_TAG = re.compile(r"^(str|int|float|bool|none|(function-\w+|list|dict|union|nullable)\[.*\])$")


def _fields_at(loc: tuple, root: type[BaseModel]) -> list[str]:
    """The field names of the table at `loc` (a path into `root`), for an unknown field's error."""
    model = root
    for part in loc:
        if isinstance(part, int):
            continue
        ann = model.model_fields[part].annotation if part in model.model_fields else None
        inner = [a for a in (typing.get_args(ann) or (ann,)) if isinstance(a, type) and issubclass(a, BaseModel)]
        inner += [
            b
            for a in typing.get_args(ann)
            for b in typing.get_args(a)
            if isinstance(b, type) and issubclass(b, BaseModel)
        ]
        if not inner:
            return []
        model = inner[0]
    return list(model.model_fields)


def describe(err: ValidationError, root: type[BaseModel]) -> str:
    """The first error of validating `root` as one line: where (dotted path), the value where pydantic's
    message lacks it, and why."""
    e = err.errors()[0]
    # pydantic names the member of a union it tried ("options.a.str"): not a place in the file
    where = ".".join(str(p) for p in e["loc"] if not _UNION_TAG.match(str(p)))
    msg = e["msg"].removeprefix("Value error, ")
    if e["type"] == "extra_forbidden":
        msg = f"unknown field; allowed: {', '.join(_fields_at(e['loc'][:-1], root))}"
    elif e["type"] not in ("value_error", "missing") and "input" in e:
        msg = f"{B.show(e['input'])} is not allowed: {msg}"
    return " ".join((f"{where}: {msg}" if where else msg).split())  # a check across fields names its own
