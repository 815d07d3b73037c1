"""
A streamed chat whose engine dies mid-stream, as the `openai` package sees it: after the first
chunks arrive, the engine serving the stream (found in /fleet/status) is SIGKILLed by its pid (the
test's sim processes, FLEETGATE_SIM_PIDS), and the iteration goes on. fleetgate resumes the stream
on another engine: the iterator yields one whole answer, one finish reason, and raises nothing.
"""

import os
import signal
import time

import httpx
from openai import OpenAI

from fleet_env import API_KEY, BASE_URL, MODEL, env_json, report

MAX_TOKENS = int(os.environ["FLEETGATE_RESUME_TOKENS"])
PIDS = env_json("FLEETGATE_SIM_PIDS")


def serving_backend(http):
    """The engine the one stream in flight is on, from fleetgate's status (bounded wait)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        busy = [b["name"] for b in http.get("/fleet/status").json()["backends"] if b["inflight"] > 0]
        if len(busy) == 1:
            return busy[0]
        time.sleep(0.01)
    raise TimeoutError("no single backend holds the stream")


client = OpenAI(base_url=f"{BASE_URL}/v1", api_key=API_KEY, max_retries=0)
stream = client.chat.completions.create(
    model=MODEL,
    messages=[{"role": "user", "content": "tell a long story"}],
    max_tokens=MAX_TOKENS,
    stream=True,
    stream_options={"include_usage": True},
)
text, finishes, usage, chunks, killed, error = "", [], None, 0, None, None
try:
    for chunk in stream:
        chunks += 1
        for choice in chunk.choices:
            text += choice.delta.content or ""
            if choice.finish_reason is not None:
                finishes.append(choice.finish_reason)
        if chunk.usage is not None:
            usage = chunk.usage.completion_tokens
        if killed is None and chunks == 3:
            with httpx.Client(base_url=BASE_URL, timeout=10) as http:
                killed = {"backend": serving_backend(http), "text_before": len(text)}
            os.kill(PIDS[killed["backend"]], signal.SIGKILL)
except Exception as exception:  # noqa: BLE001 - the test reports whatever the iterator raised
    error = f"{type(exception).__name__}: {exception}"
report({"killed": killed, "text": text, "finishes": finishes, "usage": usage, "chunks": chunks, "error": error})
