"""A Python client generated from the server's OpenAPI document, run against it (issue 31).

    python3 run.py <base URL> <service key> <work dir>

Fetches <base>/openapi.json, generates a client package with openapi-python-client (pinned:
GENERATOR below), imports every module of it, checks that it has a function for every
operation of the document, a model for every error body and a typed answer for every
documented status, then calls Analytics, AgentAnalytics, GetTeamCreditBalance and the v2
GET /api/v2/users/activity through it with the key, and a 401 (a wrong key), a 400 (a bad
date) and a 404 (an unknown group), each read into its typed error model. Every typed
answer is compared with the same request's raw JSON, fetched with urllib.

Prints one JSON object of what it read (usage-server/tests/server/openapi_client.rs checks
it against the demo's data) and exits 0; any failed check raises.
"""

import datetime
import importlib
import importlib.metadata
import json
import pkgutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

GENERATOR = "0.29.1"
INSTALL = f"python3 -m pip install openapi-python-client=={GENERATOR}"


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def raw(base, key, method, path, body=None):
    """The status and JSON body of a request, without the generated client."""
    req = urllib.request.Request(
        base + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def same(v):
    """`v` with every RFC 3339 time as Python writes it: a typed model writes `+00:00` where
    the server writes `Z`, the same instant."""
    if isinstance(v, dict):
        return {k: same(x) for k, x in v.items()}
    if isinstance(v, list):
        return [same(x) for x in v]
    if isinstance(v, str) and len(v) >= 20 and v[4] == "-" and v[10] == "T":
        try:
            return datetime.datetime.fromisoformat(v).isoformat()
        except ValueError:
            return v
    return v


def generate(base, work):
    """The generated package's directory, from the served document."""
    try:
        version = importlib.metadata.version("openapi-python-client")
    except importlib.metadata.PackageNotFoundError:
        fail(f"openapi-python-client is not installed: {INSTALL} (.ci/run does)")
    if version != GENERATOR:
        fail(f"openapi-python-client {version} is installed, the test pins {GENERATOR}: {INSTALL}")
    with urllib.request.urlopen(base + "/openapi.json", timeout=30) as r:
        doc = json.loads(r.read())
    (work / "openapi.json").write_text(json.dumps(doc))
    # No post hooks (they would need ruff on PATH); the metrics page's OpenMetrics text is
    # read as text, a media type the generator does not know by name.
    (work / "config.json").write_text(json.dumps({
        "post_hooks": [],
        "content_type_overrides": {"application/openmetrics-text": "text/plain"},
    }))
    out = work / "usage_api"
    gen = subprocess.run(
        [sys.executable, "-m", "openapi_python_client", "generate",
         "--path", str(work / "openapi.json"), "--config", str(work / "config.json"),
         "--meta", "none", "--output-path", str(out), "--overwrite"],
        capture_output=True, text=True, timeout=300,
    )
    log = gen.stdout + gen.stderr
    if gen.returncode != 0 or not out.is_dir():
        fail(f"the generator failed ({gen.returncode}):\n{log}")
    # Nothing skipped: the generator warns for every schema, response or endpoint it leaves out.
    for word in ("WARNING", "Unable to", "Error(s)", "Warning(s)", "Cannot"):
        assert word not in log, f"the generator printed {word!r}:\n{log}"
    return doc, out


def main():
    base, key, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    work.mkdir(parents=True, exist_ok=True)
    doc, out = generate(base, work)

    from openapi_python_client.strings import ClassName, snake_case

    sys.path.insert(0, str(work))
    api = importlib.import_module("usage_api")
    modules = [m.name for m in pkgutil.walk_packages(api.__path__, "usage_api.")]
    for name in modules:
        importlib.import_module(name)

    # A function for every operation, reading every status the document gives it.
    operations = 0
    for path, item in doc["paths"].items():
        for method, op in item.items():
            operations += 1
            tag, op_id = op["tags"][0], op["operationId"]
            mod = importlib.import_module(f"usage_api.api.{tag}.{snake_case(op_id)}")
            for fn in ("sync_detailed", "asyncio_detailed"):
                assert callable(getattr(mod, fn, None)), f"{method} {path}: no {fn}"
            source = Path(mod.__file__).read_text()
            assert f'"method": "{method}"' in source and f'"url": ' in source, f"{method} {path}"
            for status in op["responses"]:
                assert f"response.status_code == {status}" in source, f"{op_id}: {status} is not read"
    functions = [m for m in modules if m.count(".") == 3 and m.startswith("usage_api.api.")]
    assert len(functions) == operations, (len(functions), operations)

    # A model for every error body: the schema every error response points at.
    models = importlib.import_module("usage_api.models")
    error_models = {}
    for code, response in doc["components"]["responses"].items():
        ref = response["content"]["application/json"]["schema"]["$ref"]
        schema = ref.rsplit("/", 1)[1]
        cls = getattr(models, ClassName(schema, ""), None)
        assert cls is not None, f"no model for {schema}"
        error_models[code] = cls

    from usage_api import AuthenticatedClient
    from usage_api.api.analytics import agent_analytics, analytics, users_activity
    from usage_api.api.billing import get_team_credit_balance

    client = AuthenticatedClient(base_url=base, token=key, raise_on_unexpected_status=True)
    wrong = AuthenticatedClient(base_url=base, token="usk_wrong", raise_on_unexpected_status=True)
    today = datetime.datetime.now(datetime.timezone.utc).date()
    start = (today - datetime.timedelta(days=29)).isoformat()
    report = {"operations": operations, "functions": len(functions),
              "error_models": sorted(c.__name__ for c in error_models.values())}

    # Analytics: acceptances per language over the period, a typed request and answer.
    body = {"query_requests": [{
        "data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM", "name": "acceptances"}],
        "filters": [{"name": "date", "filter": "QUERY_FILTER_GE", "value": start}],
        "aggregations": [{"field": "language", "name": "language"}],
    }]}
    req = models.AnalyticsRequest.from_dict(body)
    assert type(req.query_requests[0]).__name__ == "QueryQUERYDATASOURCEUSERDATA", type(req.query_requests[0])
    r = analytics.sync_detailed(client=client, body=req)
    assert r.status_code == 200, r.content
    assert isinstance(r.parsed, models.AnalyticsResponse), type(r.parsed)
    items = [i.item.to_dict() for i in r.parsed.query_results[0].response_items]
    assert {"queryResults": [{"responseItems": [{"item": i} for i in items]}]} == raw(base, key, "POST", "/api/v1/Analytics", body)[1]
    report["analytics"] = {i["language"]: i["acceptances"] for i in items}

    # AgentAnalytics: the runs, typed entries.
    body = {"query_requests": [{"agent_runs": {}}]}
    r = agent_analytics.sync_detailed(client=client, body=models.AgentAnalyticsRequest.from_dict(body))
    assert r.status_code == 200, r.content
    assert isinstance(r.parsed, models.AgentAnalyticsResponse), type(r.parsed)
    runs = r.parsed.query_results[0].agent_runs.agent_runs
    assert runs and all(isinstance(x.day, datetime.datetime) for x in runs)
    assert same(r.parsed.to_dict()) == same(raw(base, key, "POST", "/api/v1/AgentAnalytics", body)[1])
    report["agent_runs"] = len(runs)
    report["agent_modes"] = sorted({x.mode.value for x in runs})

    # GetTeamCreditBalance: typed integers and times.
    r = get_team_credit_balance.sync_detailed(client=client, body=models.GetTeamCreditBalanceRequest())
    assert r.status_code == 200, r.content
    b = r.parsed
    assert isinstance(b, models.GetTeamCreditBalanceResponse), type(b)
    assert isinstance(b.billing_cycle_start, datetime.datetime) and b.billing_cycle_start < b.billing_cycle_end
    assert same(b.to_dict()) == same(raw(base, key, "POST", "/api/v1/GetTeamCreditBalance", {})[1])
    report["balance"] = {"num_seats": b.num_seats, "prompt_credits_per_seat": b.prompt_credits_per_seat}

    # GET /api/v2/users/activity (v2, the key as a bearer token): one page of typed rows.
    r = users_activity.sync_detailed(client=client, start=start, end=today.isoformat(), limit=1000)
    assert r.status_code == 200, r.content
    page = r.parsed
    assert isinstance(page, models.UsersActivityResponse200), type(page)
    assert all(isinstance(u, models.UserStats) for u in page.data)
    assert page.next_cursor is None
    wire = raw(base, key, "GET", f"/api/v2/users/activity?start={start}&end={today.isoformat()}&limit=1000")[1]
    assert same([u.to_dict() for u in page.data]) == same(wire["data"])
    report["users"] = len(page.data)
    report["active_users"] = sum(1 for u in page.data if u.active_days > 0)

    # 401: a wrong key, read into the 401's model.
    r = analytics.sync_detailed(client=wrong, body=req)
    assert r.status_code == 401, r.status_code
    e = r.parsed
    assert isinstance(e, error_models["unauthenticated"]), type(e)
    assert e.code == "unauthenticated" and e.request_id == r.headers["x-request-id"]
    report["unauthenticated"] = {"code": e.code, "message": e.message}

    # 400: a date that is no date (the pattern fits; the calendar does not).
    r = users_activity.sync_detailed(client=client, start="2025-02-30", end=today.isoformat())
    assert r.status_code == 400, r.status_code
    e = r.parsed
    assert isinstance(e, error_models["invalid_argument"]), type(e)
    assert e.code == "invalid_argument" and e.details
    assert isinstance(e.details[0], models.ErrorDetail)
    report["invalid_argument"] = {"code": e.code, "path": e.details[0].path, "rule": e.details[0].rule.value}

    # 404: a group the team does not have (documented for users/activity since issue 31).
    r = users_activity.sync_detailed(client=client, start=start, end=today.isoformat(), group="no-such-group")
    assert r.status_code == 404, r.status_code
    e = r.parsed
    assert isinstance(e, error_models["not_found"]), type(e)
    report["not_found"] = {"code": e.code}

    print(json.dumps(report))


if __name__ == "__main__":
    main()
