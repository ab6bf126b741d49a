"""rlmx from the official openai client. Start the server first (see README: "Use it from any OpenAI client")."""

import os

from openai import OpenAI
from pydantic import BaseModel

client = OpenAI(
    base_url=os.environ.get("RLMX_BASE_URL", "http://127.0.0.1:8000/v1"),
    api_key=os.environ["RLMX_SERVE_TOKEN"],
)

# 1. Files on the server (paths under a --root folder) as the context, passed with extra_body
answer = client.chat.completions.create(
    model="rlmx/gpt-5-mini",
    messages=[{"role": "user", "content": "Which service logs the most timeouts?"}],
    extra_body={"rlmx": {"paths": ["logs"]}},
)
print(answer.choices[0].message.content)
info = answer.model_extra["rlmx"]  # trace id, trace path, why it stopped, full usage
print(f"{answer.usage.total_tokens} tokens in the whole run; trace id {info['trace_id']}")

# 2. Streaming: chunks with an empty delta carry progress in an extra `rlmx` field, then the answer
stream = client.chat.completions.create(
    model="rlmx/gpt-5-mini",
    messages=[{"role": "user", "content": "Summarise each log file in one line."}],
    extra_body={"rlmx": {"paths": ["logs"], "max_llm_calls": 50}},
    stream=True,
)
for chunk in stream:
    progress = (chunk.model_extra or {}).get("rlmx") or {}
    if "message" in progress:
        print("...", progress["message"])
    elif chunk.choices and chunk.choices[0].delta.content:
        print(chunk.choices[0].delta.content)


# 3. A typed answer: response_format with a JSON schema (here made from a pydantic model)
class Busiest(BaseModel):
    service: str
    timeouts: int


typed = client.chat.completions.parse(
    model="rlmx/gpt-5-mini",
    messages=[{"role": "user", "content": "Which service logs the most timeouts, and how many?"}],
    response_format=Busiest,
    extra_body={"rlmx": {"paths": ["logs"]}},
)
print(repr(typed.choices[0].message.parsed))
