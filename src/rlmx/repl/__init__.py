"""What model-written code finds in its REPL: the context's tools and the namespace they live in.

`namespace` puts together the names a cell sees (`context`, `peek`, `grep`, `partition`, `search`,
`count_tokens`, the host's sub-calls, `FINAL`...); `textview`, `helpers`, `search`, `vectors` and
`tokens` are the tools. It all runs inside the sandboxed worker, so it stays light: the standard
library at import, bm25s / tiktoken / numpy / torch on first use. It imports nothing from
`rlmx.sandbox` or `rlmx.context`; they import it.
"""
