"""Routing a request among the providers of its model, and failing over between them.

`preferences`: the request's own provider object (OpenRouter's shape). `circuits`: which
providers are cooling after failures, per process and shared through Redis. `router`: the order
in which a request's candidates are tried. `failover`: the attempts, and the one charged.
`attempts`: what failover asks of billing around each attempt (a contract billing keeps).
"""
