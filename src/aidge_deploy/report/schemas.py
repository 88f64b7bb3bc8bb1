"""The JSON Schemas shipped with aidge-deploy, document versions, and validation.

Every JSON document a result bundle holds has a schema in ``aidge_deploy/schemas``:
``summary``, ``run_metadata``, ``profile_results``, ``manifest`` and the Model Explorer
overlays (``me_overlay``, Model Explorer's own format, unversioned); ``thresholds`` is the
file a user writes for ``compare``. A versioned document names itself (``schema``) and its
version (``schema_version``). Fields may be added within a version (readers of that version
ignore what they do not know); a field renamed, removed or reshaped makes a new version,
and its older schema stays here as ``<name>.v<N>.schema.json`` so that bundles written
before can still be checked and read. A document of a version this aidge-deploy does not
know (written by a newer one) is refused with what to do, never half-read.

The thresholds schema is strict, because it is written by hand and a misspelt key would
otherwise silently disable a regression check.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
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
    #: ``model_explorer/me_overlay_<figure>.json`` (Model Explorer's format: no version field)
    OVERLAY = "me_overlay"


#: the ``schema`` field of each versioned document
DOCUMENT_IDS: Mapping[SchemaName, str] = {
    SchemaName.SUMMARY: "aidge-deploy/summary",
    SchemaName.RUN_METADATA: "aidge-deploy/run-metadata",
    SchemaName.PROFILE_RESULTS: "aidge-deploy/profile-results",
    SchemaName.MANIFEST: "aidge-deploy/manifest",
    SchemaName.THRESHOLDS: "aidge-deploy/thresholds",
}

#: the version of each document this aidge-deploy writes
CURRENT_VERSIONS: Mapping[SchemaName, int] = {
    SchemaName.SUMMARY: 2,
    SchemaName.RUN_METADATA: 1,
    SchemaName.PROFILE_RESULTS: 1,
    SchemaName.MANIFEST: 1,
    SchemaName.THRESHOLDS: 1,
}

#: the older versions it still reads (each with its schema file ``<name>.v<N>.schema.json``)
OLDER_VERSIONS: Mapping[SchemaName, tuple[int, ...]] = {SchemaName.SUMMARY: (1,)}


class SchemaVersionError(ReportError):
    """A document of a version this aidge-deploy cannot read (a newer tool wrote it)."""


def readable_versions(name: SchemaName) -> tuple[int, ...]:
    """Every version of ``name`` this aidge-deploy reads, oldest first."""
    return (*OLDER_VERSIONS.get(name, ()), CURRENT_VERSIONS[name])


def _schema_file(name: SchemaName, version: int | None) -> str:
    if version is None or version == CURRENT_VERSIONS.get(name):
        return f"{name.value}.schema.json"
    if version not in OLDER_VERSIONS.get(name, ()):
        raise ValueError(f"no schema for {name.value} version {version}")
    return f"{name.value}.v{version}.schema.json"


@functools.cache
def load_schema(name: SchemaName, version: int | None = None) -> dict[str, Any]:
    """The schema document of ``name`` (its current version, or an older ``version``)."""
    text = (
        resources.files("aidge_deploy")
        .joinpath("schemas", _schema_file(SchemaName(name), version))
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


def document_version(name: SchemaName, document: Any, *, where: str = "") -> int:
    """The version of a versioned document, checked readable (``SchemaVersionError`` for a
    newer one, ``ReportError`` for a document that is not a ``name`` document at all)."""
    where = where or name.value
    expected = DOCUMENT_IDS[name]
    if not isinstance(document, Mapping) or document.get("schema", expected) != expected:
        found = document.get("schema") if isinstance(document, Mapping) else type(document).__name__
        raise ReportError(
            f"{where}: not an {expected} document (schema {found!r})",
            hint="Pass the file aidge-deploy wrote, unedited.",
        )
    version = document.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ReportError(
            f"{where}: schema_version {version!r} is not a version number",
            hint="Pass the file aidge-deploy wrote, unedited.",
        )
    known = readable_versions(name)
    if version not in known:
        newer = version > known[-1]
        raise SchemaVersionError(
            f"{where}: {expected} version {version} "
            + ("is newer than this aidge-deploy reads" if newer else "is not one it reads")
            + f" (it reads versions {', '.join(map(str, known))})",
            hint="Upgrade aidge-deploy (pip install -U aidge-deploy) to read it."
            if newer
            else "The file was edited or written by another tool.",
        )
    return version


def schema_errors(name: SchemaName, document: Any, version: int | None = None) -> list[str]:
    """Every violation of the schema (of ``version``, default the current one), as
    ``path: message`` lines (empty when valid)."""
    validator = _validator_class()(load_schema(name, version))
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}" for e in errors]


def validate_document(
    name: SchemaName, document: Any, *, where: str = "", version: int | None = None
) -> None:
    """Raise ``ReportError`` listing the first violations when ``document`` is invalid
    against the schema of ``version`` (default: the current one)."""
    errors = schema_errors(name, document, version)
    if errors:
        shown = "; ".join(errors[:5]) + (f" (+{len(errors) - 5} more)" if len(errors) > 5 else "")
        file = _schema_file(SchemaName(name), version)
        label = name.value if version is None else f"{name.value} v{version}"
        raise ReportError(
            f"{where or name.value}: does not match the {label} schema: {shown}",
            hint=f"See aidge_deploy/schemas/{file} for the expected format.",
        )


def check_document(name: SchemaName, document: Any, *, where: str = "") -> int:
    """A versioned document read from a file: its version checked readable, then the
    document validated against that version's schema. Returns the version."""
    version = document_version(name, document, where=where)
    validate_document(name, document, where=where, version=version)
    return version
