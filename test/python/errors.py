"""
fleetgate's refusals as the `openai` package raises them, sync and async: a bad body
(`BadRequestError`), a missing file (`NotFoundError`), a wrong API key (`AuthenticationError`), and
a 429 with `Retry-After` from a full queue (`RateLimitError`), each with fleetgate's own message;
then `max_retries=2` waits out the 429 and succeeds once capacity frees. The queue is the `tight`
class's (`max_waiting: 1`, its key FLEETGATE_TIGHT_KEY) in front of the one engine serving
FLEETGATE_TIGHT_MODEL (one request at a time): a few requests fill it.
"""

import asyncio
import os
import time

import httpx
from openai import (
    APIStatusError,
    AsyncOpenAI,
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    OpenAI,
    RateLimitError,
)

from fleet_env import API_KEY, BASE_URL, MODEL, report

TIGHT_KEY = os.environ["FLEETGATE_TIGHT_KEY"]
TIGHT_MODEL = os.environ["FLEETGATE_TIGHT_MODEL"]
MISSING_FILE = "file-" + "0" * 24
MESSAGES = [{"role": "user", "content": "hello"}]
FILL_TOKENS = 40
MAX_FILLS = 8


def caught(call):
    """What `call` raised: its class, status, message and Retry-After; None when it returned."""
    try:
        call()
        return None
    except APIStatusError as error:
        return described(error)


async def caught_async(call):
    try:
        await call()
        return None
    except APIStatusError as error:
        return described(error)


def described(error):
    return {
        "type": type(error).__name__,
        "status": error.status_code,
        "message": error.message,
        # fleetgate's own message, as the SDK parsed it from the body's `error`
        "body_message": error.body.get("message") if isinstance(error.body, dict) else None,
        "retry_after": error.response.headers.get("retry-after"),
    }


INPUT = b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n'


def bad_body(client, file_id):
    """A job for an endpoint the Batch API does not run: fleetgate's 400 names the ones it does."""
    return client.batches.create(input_file_id=file_id, endpoint="/v1/nowhere", completion_window="24h")


def sync_checks():
    client = OpenAI(base_url=f"{BASE_URL}/v1", api_key=API_KEY, max_retries=0)
    wrong = OpenAI(base_url=f"{BASE_URL}/v1", api_key="sk-wrong", max_retries=0)
    file_id = client.files.create(file=("input.jsonl", INPUT), purpose="batch").id
    return {
        "bad_body": caught(lambda: bad_body(client, file_id)),
        "missing_file": caught(lambda: client.files.retrieve(MISSING_FILE)),
        "missing_batch_input": caught(
            lambda: client.batches.create(input_file_id=MISSING_FILE, endpoint="/v1/chat/completions", completion_window="24h")
        ),
        "wrong_key": caught(lambda: wrong.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4)),
        "wrong_key_models": caught(lambda: wrong.models.list()),
    }


async def async_checks():
    client = AsyncOpenAI(base_url=f"{BASE_URL}/v1", api_key=API_KEY, max_retries=0)
    wrong = AsyncOpenAI(base_url=f"{BASE_URL}/v1", api_key="sk-wrong", max_retries=0)
    file_id = (await client.files.create(file=("input.jsonl", INPUT), purpose="batch")).id
    out = {
        "bad_body": await caught_async(lambda: bad_body(client, file_id)),
        "missing_file": await caught_async(lambda: client.files.retrieve(MISSING_FILE)),
        "wrong_key": await caught_async(
            lambda: wrong.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4)
        ),
    }
    out["rate_limit"] = await rate_limit()
    await client.close()
    await wrong.close()
    return out


async def tight_load(http):
    """Requests on the tight engine and waiting in the tight class, from /fleet/status."""
    status = (await http.get("/fleet/status")).json()
    inflight = sum(b["inflight"] for b in status["backends"] if TIGHT_MODEL in b.get("models", []))
    return inflight, status.get("waiting", {}).get("tight", 0)


async def until_counted(http, fills):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        inflight, waiting = await tight_load(http)
        if inflight + waiting >= fills:
            return waiting
        await asyncio.sleep(0.02)
    raise TimeoutError(f"fleetgate did not count {fills} requests on {TIGHT_MODEL}")


async def fill_until_waiting(tight, http, fills):
    """Adds requests one at a time until one waits in the tight class; returns how many waiting."""
    waiting = 0
    while waiting < 1 and len(fills) < MAX_FILLS:
        call = tight.chat.completions.create(model=TIGHT_MODEL, messages=MESSAGES, max_tokens=FILL_TOKENS)
        fills.append(asyncio.ensure_future(call))
        waiting = await until_counted(http, len(fills))
    return waiting


async def rate_limit():
    """
    Fills the tight queue until one request waits; the next is refused 429 with Retry-After; then
    `max_retries=2` retries it until it is taken. The engine's cap may still grow by a slot between
    the fill and the refusal (auto cap), so a round whose probe was taken is tried again, at most 3.
    """
    tight = AsyncOpenAI(base_url=f"{BASE_URL}/v1", api_key=TIGHT_KEY, max_retries=0, timeout=60)
    fills, refused, rounds = [], None, 0
    async with httpx.AsyncClient(base_url=BASE_URL, timeout=10) as http:
        while refused is None and rounds < 3:
            rounds += 1
            await fill_until_waiting(tight, http, fills)
            refused = await caught_async(
                lambda: tight.chat.completions.create(model=TIGHT_MODEL, messages=MESSAGES, max_tokens=4)
            )
    retrying = OpenAI(base_url=f"{BASE_URL}/v1", api_key=TIGHT_KEY, max_retries=2, timeout=60)
    started = time.monotonic()

    def retried_call():
        raw = retrying.chat.completions.with_raw_response.create(model=TIGHT_MODEL, messages=MESSAGES, max_tokens=4)
        return {"retries_taken": raw.retries_taken, "finish": raw.parse().choices[0].finish_reason}

    retried = await asyncio.to_thread(retried_call)
    retried["seconds"] = round(time.monotonic() - started, 2)
    filled = await asyncio.gather(*fills, return_exceptions=True)
    await tight.close()
    return {
        "rounds": rounds,
        "fills": len(fills),
        "fills_answered": sum(1 for f in filled if not isinstance(f, BaseException)),
        "fill_errors": [repr(f) for f in filled if isinstance(f, BaseException)],
        "refused": refused,
        "retried": retried,
    }


report({"sync": sync_checks(), "async": asyncio.run(async_checks())})
