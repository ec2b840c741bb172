"""One session's protocol state machine and its commands, with no I/O."""
