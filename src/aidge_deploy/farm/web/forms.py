"""The dashboard's forms, as typed models made of the REST API's bounded field types.

A form is read with bounds (``read_form``: how many fields, files and bytes per part),
its CSRF token checked (``session.check_csrf``), then validated into its model: a value
out of range, not a number, or text no database stores is a 422 naming the field (an
error page), never a 500 deep in a handler. Unknown fields are ignored (browsers send
their buttons' names).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Request
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from starlette.datastructures import FormData

from aidge_deploy.farm.fields import MAX_ID, Line, Password, UserName
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.web.session import check_csrf, check_login_csrf


def _blank_is_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


#: a whole number typed in a form (blank: not given)
FormInt = Annotated[
    Annotated[int, Field(ge=1, le=2**31 - 1)] | None, BeforeValidator(_blank_is_none)
]
FormCount = Annotated[
    Annotated[int, Field(ge=0, le=2**31 - 1)] | None, BeforeValidator(_blank_is_none)
]
FormSeconds = Annotated[
    Annotated[float, Field(gt=0, le=7 * 24 * 3600.0, allow_inf_nan=False)] | None,
    BeforeValidator(_blank_is_none),
]
FormJobId = Annotated[int, Field(ge=1, le=MAX_ID)]
NextPath = Annotated[Line, Field(max_length=2000)]


class FormModel(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=False)


class NextForm(FormModel):
    """A form that goes back to a page of this site afterwards (cancel, logout)."""

    next: NextPath = ""


class LoginForm(FormModel):
    username: Annotated[Line, Field(max_length=64)] = ""
    password: Annotated[Line, Field(max_length=1024)] = ""
    next: NextPath = ""


class CompareForm(FormModel):
    base: FormJobId
    cand: FormJobId


class AddUserForm(FormModel):
    username: UserName
    password: Password
    role: Literal["user", "admin"] = "user"


class PasswordForm(FormModel):
    password: Password


class SubmitForm(FormModel):
    destination: Annotated[Line, Field(max_length=200)] = ""
    kind: Literal["archive", "onnx"] = "archive"
    dtype: Annotated[Line, Field(max_length=16)] = "float32"
    iterations: FormInt = None
    warmup: FormCount = None
    run_timeout: FormSeconds = None


class EmptyForm(FormModel):
    """A button: nothing but its CSRF token."""


class DrainForm(FormModel):
    """Drain a board: why (shown on the boards page; empty: "drained by an admin")."""

    reason: Annotated[Line, Field(max_length=500)] = ""


#: every form model (the fuzz test sends their fields to every form)
FORMS = (
    NextForm,
    LoginForm,
    CompareForm,
    AddUserForm,
    PasswordForm,
    SubmitForm,
    EmptyForm,
    DrainForm,
)


def form_error(exc: ValidationError) -> FarmRequestError:
    """A form's refusal: 422, each bad field named."""
    problems = [
        f"{'.'.join(str(p) for p in e.get('loc', ())) or 'form'}: {e.get('msg', 'invalid')}"
        for e in exc.errors()[:5]
    ]
    fields = sorted({str(e["loc"][0]) for e in exc.errors() if e.get("loc")})
    return FarmRequestError(
        422, "invalid form: " + "; ".join(problems), "Correct the named field.", fields=fields
    )


def parse_form[F: FormModel](model: type[F], form: FormData) -> F:
    """``form``'s text fields as ``model`` (``FarmRequestError`` 422 naming the field)."""
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise form_error(exc) from None


async def read_form[F: FormModel](
    request: Request,
    model: type[F],
    *,
    login: bool = False,
    max_fields: int = 10,
    max_part_size: int = 4096,
) -> F:
    """Read a small form (no file), check its CSRF token (the login form's own with
    ``login``), and validate it into ``model``."""
    form = await request.form(max_files=0, max_fields=max_fields, max_part_size=max_part_size)
    if login:
        check_login_csrf(request, form)
    else:
        check_csrf(request, form)
    return parse_form(model, form)


__all__ = [
    "FORMS",
    "AddUserForm",
    "CompareForm",
    "DrainForm",
    "EmptyForm",
    "FormModel",
    "LoginForm",
    "NextForm",
    "PasswordForm",
    "SubmitForm",
    "form_error",
    "parse_form",
    "read_form",
]
