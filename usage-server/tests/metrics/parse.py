"""Reads a scrape of GET /metrics on stdin with a parser of `prometheus_client` (PyPI,
the Python reference client) and prints the families it finds as JSON, one object per
family: {"name", "type", "samples": [[name, {labels}, value], ...]}.

Usage: parse.py classic|openmetrics < text

`classic` is `prometheus_client.parser` (the Prometheus text format 0.0.4), `openmetrics`
`prometheus_client.openmetrics.parser` (OpenMetrics 1.0, strict: it refuses text that
breaks the format). Exit 2 when the package is missing, 1 when the parser refuses the text.
"""

import json
import sys

try:
    from prometheus_client import parser as classic
    from prometheus_client.openmetrics import parser as openmetrics
except ImportError as e:
    print(f"prometheus_client is not installed ({e}): "
          "python3 -m pip install prometheus_client==0.26.0", file=sys.stderr)
    sys.exit(2)


def main():
    which = sys.argv[1]
    module = {"classic": classic, "openmetrics": openmetrics}[which]
    text = sys.stdin.read()
    try:
        families = list(module.text_string_to_metric_families(text))
    except Exception as e:  # the parsers raise ValueError, and others on odd input
        print(f"the {which} parser refuses the text: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
    out = [{"name": f.name, "type": f.type,
            "samples": [[s.name, s.labels, s.value] for s in f.samples]}
           for f in families]
    json.dump(out, sys.stdout)


main()
