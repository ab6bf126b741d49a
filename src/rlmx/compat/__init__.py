"""Other projects' public APIs over rlmx: `rlmx.compat.rlms` is the official RLM package's (`rlms` 0.1.3,
imported as `rlm`). See docs/migrating-from-rlms.md."""
