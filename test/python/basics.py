"""
The everyday calls of a generation script, sync (`OpenAI`) and async (`AsyncOpenAI`):
`models.list`, a chat completion, a streamed one with `stream_options.include_usage`, a text
completion, and SGLang's native `/generate` through httpx. Prints what each returned.
"""

import asyncio

import httpx
from openai import AsyncOpenAI, OpenAI

from fleet_env import API_KEY, BASE_URL, MODEL, report

MESSAGES = [{"role": "user", "content": "Say hello"}]
AUTH = {"authorization": f"Bearer {API_KEY}"}
GENERATE = {"text": "Once upon a time", "sampling_params": {"max_new_tokens": 6}}


def choice_of(completion):
    choice = completion.choices[0]
    return {"finish_reason": choice.finish_reason, "completion_tokens": completion.usage.completion_tokens}


def stream_summary(chunks):
    text, finishes, usage, count = "", [], None, 0
    for chunk in chunks:
        count += 1
        for choice in chunk.choices:
            if choice.delta is not None and choice.delta.content:
                text += choice.delta.content
            if choice.finish_reason is not None:
                finishes.append(choice.finish_reason)
        if chunk.usage is not None:
            usage = {"prompt_tokens": chunk.usage.prompt_tokens, "completion_tokens": chunk.usage.completion_tokens}
    return {"text": text, "finish_reasons": finishes, "usage": usage, "chunks": count}


def generate_summary(response):
    body = response.json()
    return {"status": response.status_code, "text": body.get("text"), "meta": body.get("meta_info", {})}


def sync_checks():
    client = OpenAI(base_url=f"{BASE_URL}/v1", api_key=API_KEY, max_retries=0)
    chat = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)
    stream = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=12, stream=True, stream_options={"include_usage": True}
    )
    completion = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=7)
    with httpx.Client(base_url=BASE_URL, headers=AUTH, timeout=30) as http:
        generated = http.post("/generate", json=GENERATE)
    return {
        "models": sorted(model.id for model in client.models.list()),
        "chat": {"content": chat.choices[0].message.content, **choice_of(chat)},
        "stream": stream_summary(stream),
        "completion": {"text": completion.choices[0].text, **choice_of(completion)},
        "generate": generate_summary(generated),
    }


async def async_checks():
    client = AsyncOpenAI(base_url=f"{BASE_URL}/v1", api_key=API_KEY, max_retries=0)
    models = [model.id async for model in client.models.list()]
    chat = await client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)
    stream = await client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=12, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    completion = await client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=7)
    async with httpx.AsyncClient(base_url=BASE_URL, headers=AUTH, timeout=30) as http:
        generated = await http.post("/generate", json=GENERATE)
    await client.close()
    return {
        "models": sorted(models),
        "chat": {"content": chat.choices[0].message.content, **choice_of(chat)},
        "stream": stream_summary(chunks),
        "completion": {"text": completion.choices[0].text, **choice_of(completion)},
        "generate": generate_summary(generated),
    }


report({"sync": sync_checks(), "async": asyncio.run(async_checks())})
