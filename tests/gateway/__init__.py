"""The gateway's tests, by what they exercise; gateway_helpers runs the real `gateway` command."""
