#!/usr/bin/env python3
"""Check a dashboard's JSON against Grafana's dashboard schema, as the grafana-foundation-sdk
(Grafana's schema, generated into Python) reads it: the JSON is read into the schema's
Dashboard model and written back; a field the schema does not have is dropped on the way, a
value of the wrong shape comes back different. Every field of the file must come back as it
was. Exit 0 when it does, 1 with the differences when not.

    python3 examples/grafana/check_schema.py examples/grafana/plumb-dashboard.json

Needs `pip install grafana-foundation-sdk` (scripts/setup --test puts a pinned release into
.venv-test).
"""

import json
import sys

from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard


def differences(ours, back, path="$"):
    out = []
    if isinstance(ours, dict):
        if not isinstance(back, dict):
            return [f"{path}: became {type(back).__name__}"]
        for k, v in ours.items():
            if k not in back:
                out.append(f"{path}.{k}: not in the schema (dropped)")
            else:
                out += differences(v, back[k], f"{path}.{k}")
    elif isinstance(ours, list):
        if not isinstance(back, list) or len(ours) != len(back):
            return [f"{path}: list came back different"]
        for i, (a, b) in enumerate(zip(ours, back)):
            out += differences(a, b, f"{path}[{i}]")
    elif ours != back:
        out.append(f"{path}: {ours!r} came back as {back!r}")
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        ours = json.load(f)
    model = Dashboard.from_json(ours)
    back = json.loads(json.dumps(model, cls=JSONEncoder))
    diff = differences(ours, back)
    for d in diff:
        print(d)
    if diff:
        sys.exit(1)
    print(f"{sys.argv[1]}: every field is in Grafana's dashboard schema")


if __name__ == "__main__":
    main()
