"""OpenAI-compatible server: `app` (routes, streaming), `protocol` (request/response models),
`worker` (the engine thread), `output` (per-choice text and tool-call assembly), `tools`
(tool-calling prompts and grammars). Importing this package loads no fastapi; `app` does."""
