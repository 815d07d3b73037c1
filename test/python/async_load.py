"""
A generation script's usual shape: `AsyncOpenAI` with 500 requests in flight at once, every second
one streamed. Prints how many were answered, each one's finish reasons, the wall time, and
fleetgate's resident memory at the end (its pid from the test).
"""

import asyncio
import os
import time

from openai import APIError, AsyncOpenAI

from fleet_env import API_KEY, BASE_URL, MODEL, report, rss_mb

REQUESTS = 500
MAX_TOKENS = 16


async def one(client, i):
    messages = [{"role": "user", "content": f"request {i}"}]
    try:
        if i % 2 == 0:
            answer = await client.chat.completions.create(model=MODEL, messages=messages, max_tokens=MAX_TOKENS)
            return {"finishes": [c.finish_reason for c in answer.choices], "text": answer.choices[0].message.content}
        stream = await client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=MAX_TOKENS, stream=True
        )
        finishes, text = [], ""
        async for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                if choice.finish_reason is not None:
                    finishes.append(choice.finish_reason)
        return {"finishes": finishes, "text": text}
    except APIError as error:
        return {"error": f"{type(error).__name__}: {error}"}


async def main():
    client = AsyncOpenAI(base_url=f"{BASE_URL}/v1", api_key=API_KEY, max_retries=0, timeout=120)
    started = time.monotonic()
    answers = await asyncio.gather(*(one(client, i) for i in range(REQUESTS)))
    seconds = time.monotonic() - started
    await client.close()
    errors = [a["error"] for a in answers if "error" in a]
    one_finish = sum(1 for a in answers if a.get("finishes") == ["length"])
    texts = {a["text"] for a in answers if "text" in a}
    return {
        "requests": REQUESTS,
        "answered": sum(1 for a in answers if "finishes" in a),
        "one_finish_each": one_finish,
        "distinct_texts": len(texts),
        "text": next(iter(texts), None),
        "errors": errors[:5],
        "seconds": round(seconds, 2),
        "fleetgate": rss_mb(os.environ["FLEETGATE_PID"]),
    }


report(asyncio.run(main()))
