"""
The OpenAI Batch API on fleetgate's URL, as the `openai` package drives it: `files.create`,
`batches.create` with `metadata`, `retrieve`, `list` with `limit`/`after`, `cancel` mid-job (sync,
then async: the SDK's cancel is a POST with `content-type: application/json` and an empty body),
`files.content` of an output and an error file, `files.delete`. Prints what each returned.
"""

import asyncio
import json
import time

from openai import AsyncOpenAI, NotFoundError, OpenAI

from fleet_env import API_KEY, BASE_URL, MODEL, report

ENDPOINT = "/v1/chat/completions"
POLL_S = 0.05
TIMEOUT_S = 60


def jsonl(count, max_tokens, bad=()):
    """`count` chat lines r0.., those in `bad` naming a model nobody serves (a 404 each: the error file)."""
    lines = []
    for i in range(count):
        model = "no-such-model" if i in bad else MODEL
        body = {"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": f"q{i}"}]}
        lines.append(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": ENDPOINT, "body": body}))
    return ("\n".join(lines) + "\n").encode()


def until(fetch, done, what):
    """Polls `fetch` until `done(value)`, at most TIMEOUT_S; returns every value seen."""
    seen = [fetch()]
    deadline = time.monotonic() + TIMEOUT_S
    while not done(seen[-1]):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: still {seen[-1].status} after {TIMEOUT_S} s")
        time.sleep(POLL_S)
        seen.append(fetch())
    return seen


def lines_of(client, file_id):
    text = client.files.content(file_id).text
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def sync_checks(client):
    out = {}
    small = client.files.create(file=("small.jsonl", jsonl(20, 4, bad={3, 11})), purpose="batch")
    out["file"] = {"object": small.object, "purpose": small.purpose, "bytes": small.bytes}
    done = client.batches.create(
        input_file_id=small.id, endpoint=ENDPOINT, completion_window="24h", metadata={"job": "python-sdk"}
    )
    finished = until(lambda: client.batches.retrieve(done.id), lambda b: b.status == "completed", "small job")[-1]
    output, errors = lines_of(client, finished.output_file_id), lines_of(client, finished.error_file_id)
    out["completed"] = {
        "created_status": done.status,
        "status": finished.status,
        "metadata": finished.metadata,
        "counts": finished.request_counts.model_dump(),
        "output_ids": sorted(line["custom_id"] for line in output),
        "output_statuses": sorted({line["response"]["status_code"] for line in output}),
        "error_ids": sorted(line["custom_id"] for line in errors),
        "error_statuses": sorted({(line["response"] or {}).get("status_code") for line in errors}),
    }

    large = client.files.create(file=("large.jsonl", jsonl(4000, 24)), purpose="batch")
    job = client.batches.create(input_file_id=large.id, endpoint=ENDPOINT, completion_window="24h")
    until(lambda: client.batches.retrieve(job.id), lambda b: b.request_counts.completed > 0, "the large job started")
    cancelling = client.batches.cancel(job.id)
    seen = until(lambda: client.batches.retrieve(job.id), lambda b: b.status == "cancelled", "the cancel")
    ended = seen[-1]
    output = lines_of(client, ended.output_file_id) if ended.output_file_id else []
    out["cancelled"] = {
        "cancel_answer": cancelling.status,
        "statuses": list(dict.fromkeys([cancelling.status] + [b.status for b in seen])),
        "counts": ended.request_counts.model_dump(),
        "output_lines": len(output),
        "output_ok": all(line["response"]["status_code"] == 200 for line in output),
        "cancelled_at": ended.cancelled_at is not None,
    }

    first = client.batches.list(limit=1)
    second = client.batches.list(limit=1, after=first.data[0].id)
    out["list"] = {
        "first": [b.id for b in first.data],
        "first_has_more": first.has_more,
        "second": [b.id for b in second.data],
        "created_at": [b.created_at for b in first.data + second.data],
        "all": [b.id for b in client.batches.list(limit=1)],
        "jobs": {"completed": done.id, "cancelled": job.id},
    }

    deleted = [client.files.delete(f) for f in (small.id, finished.output_file_id, finished.error_file_id)]
    try:
        client.files.retrieve(small.id)
        gone = None
    except NotFoundError as error:
        gone = {"status": error.status_code, "message": error.message}
    out["delete"] = {"answers": [d.model_dump() for d in deleted], "retrieve_after": gone}
    return out


async def async_checks():
    client = AsyncOpenAI(base_url=f"{BASE_URL}/v1", api_key=API_KEY, max_retries=0)
    file = await client.files.create(file=("async.jsonl", jsonl(2000, 24)), purpose="batch")
    job = await client.batches.create(input_file_id=file.id, endpoint=ENDPOINT, completion_window="24h")
    cancelling = await client.batches.cancel(job.id)
    statuses = [cancelling.status]
    deadline = time.monotonic() + TIMEOUT_S
    while statuses[-1] != "cancelled" and time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
        statuses.append((await client.batches.retrieve(job.id)).status)
    listed = [b.id async for b in client.batches.list(limit=2)]
    deleted = await client.files.delete(file.id)
    await client.close()
    return {"id": job.id, "statuses": list(dict.fromkeys(statuses)), "listed": listed, "deleted": deleted.deleted}


sync_client = OpenAI(base_url=f"{BASE_URL}/v1", api_key=API_KEY, max_retries=0)
report({"sync": sync_checks(sync_client), "async": asyncio.run(async_checks())})
