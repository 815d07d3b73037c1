"""
What every script of the Python client suite shares: where fleetgate is and with which key, as
test/integration/python-sdk.test.ts passes them in the environment, and the one JSON line each
script prints for that test to assert on. The scripts use only what a user's generation script
would: the `openai` package and httpx, against fleetgate's URL.
"""

import json
import os
import sys

BASE_URL = os.environ["FLEETGATE_URL"]
API_KEY = os.environ["FLEETGATE_API_KEY"]
MODEL = os.environ["FLEETGATE_MODEL"]


def env_json(name):
    """A JSON value the test passed in the environment (pids, names)."""
    return json.loads(os.environ[name])


def rss_mb(pid):
    """The resident and peak resident memory of process `pid`, MB, from /proc."""
    fields = {}
    with open(f"/proc/{pid}/status", encoding="utf8") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = round(int(value.split()[0]) / 1024, 1)
    return {"rss_mb": fields.get("VmRSS"), "peak_rss_mb": fields.get("VmHWM")}


def report(result):
    """The script's one result line; the test reads the last line of stdout."""
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
