"""The JSON Schemas shipped with aidge-deploy, and validation of bundle documents.

Schemas are versioned and permissive (unknown fields are allowed) so that an older reader
can still read a newer bundle; they pin what a consumer relies on: names, types, units and
provenance of every figure. The thresholds schema is strict, because it is written by hand
and a misspelt key would otherwise silently disable a regression check.
"""

from __future__ import annotations

import functools
import json
from enum import StrEnum
from importlib import resources
from typing import TYPE_CHECKING, Any

from aidge_deploy.errors import ReportError

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator


class SchemaName(StrEnum):
    SUMMARY = "summary"
    RUN_METADATA = "run_metadata"
    PROFILE_RESULTS = "profile_results"
    MANIFEST = "manifest"
    THRESHOLDS = "thresholds"


@functools.cache
def load_schema(name: SchemaName) -> dict[str, Any]:
    """The schema document ``schemas/<name>.schema.json`` from the installed package."""
    text = (
        resources.files("aidge_deploy")
        .joinpath("schemas", f"{SchemaName(name).value}.schema.json")
        .read_text(encoding="utf-8")
    )
    schema: dict[str, Any] = json.loads(text)
    _validator_class().check_schema(schema)
    return schema


def _validator_class() -> type[Draft202012Validator]:
    """jsonschema, imported when a document is validated: importing it costs a run that
    writes no bundle a tenth of a second or more (its format checkers), and every run
    imports this module through the ``--report`` check."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator


def schema_errors(name: SchemaName, document: Any) -> list[str]:
    """Every violation of the schema, as ``path: message`` lines (empty when valid)."""
    validator = _validator_class()(load_schema(name))
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}" for e in errors]


def validate_document(name: SchemaName, document: Any, *, where: str = "") -> None:
    """Raise ``ReportError`` listing the first violations when ``document`` is invalid."""
    errors = schema_errors(name, document)
    if errors:
        shown = "; ".join(errors[:5]) + (f" (+{len(errors) - 5} more)" if len(errors) > 5 else "")
        raise ReportError(
            f"{where or name.value}: does not match the {name.value} schema: {shown}",
            hint=f"See aidge_deploy/schemas/{name.value}.schema.json for the expected format.",
        )
