"""Schemathesis hooks of .ci/schemathesis.sh: put the demo server's key into request bodies
(and into `Authorization: Bearer` for the GET endpoints).

The key comes from the environment (USAGE_KEY). Positive cases always get it under
`service_key`. The document accepts both spellings of a field (snake_case, lowerCamelCase)
but says in words that giving both is a 400 (`conflicting_fields`): positive cases keep the
snake_case one, so that they stay positive. Negative cases get the key only when their body
is an object with no key in either spelling (absent or null), so the mutation that made them
negative is kept and the request reaches validation.
"""

import os
import re

import schemathesis
from schemathesis.generation.modes import GenerationMode

KEY = os.environ["USAGE_KEY"]


def _mode(case):
    meta = getattr(case, "meta", None)
    generation = getattr(meta, "generation", None)
    return getattr(generation, "mode", None)


def _snake(name):
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def _one_spelling(value):
    if isinstance(value, dict):
        for key in list(value):
            snake = _snake(key)
            if snake != key and snake in value:
                del value[key]
        for v in value.values():
            _one_spelling(v)
    elif isinstance(value, list):
        for v in value:
            _one_spelling(v)


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    # The GET endpoints (/api/v2/...) take the key only as a bearer token: every case gets
    # it, so that negative cases reach the parameters' checks.
    if case.path.startswith("/api/v2/"):
        case.headers = dict(case.headers or {})
        case.headers["Authorization"] = f"Bearer {KEY}"
        return
    body = case.body
    if not isinstance(body, dict):
        return
    if _mode(case) == GenerationMode.NEGATIVE:
        if body.get("service_key") is None and body.get("serviceKey") is None:
            body["service_key"] = KEY
        return
    _one_spelling(body)
    body.pop("serviceKey", None)
    body["service_key"] = KEY
