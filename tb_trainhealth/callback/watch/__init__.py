"""Training that stops: a step that never ends (`stall_watchdog`, which reads the threads'
stacks through `thread_places`) and an exception that ends it (`crash_guard`). May import:
`callback.record`, `callback.step` (to name a wait for input), `contract`.
"""
