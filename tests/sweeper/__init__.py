"""The sweeper, in process and as a command."""
