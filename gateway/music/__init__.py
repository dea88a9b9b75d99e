"""Music generation (spec 4.1-4.3): a flat price held, one upstream call, hosted or inline audio.

Its routes are declared in `routes.ENDPOINTS` (gateway.routes lists them), its own parts built
by `parts.music_ctx`; nothing is imported here, so a module below can be imported without
pulling in the routes.

- `routes`: the handlers of POST/GET /v1/music, /v1/music/{id}/content and /link, /media;
  their endpoints.
- `request`: POST /v1/music input: validation, reference images, prompt composition, body hash.
- `generation`: one generation: hold, claim, call upstream, store, settle; its response body.
- `idempotency`: Idempotency-Key claims in the ledger, waits, replays (IdempotencyKeys).
- `history`: the read side: the track list, a track's download link, replays' tracks.
- `links`: short-lived signed /media paths (Signer).
- `parts`: music's own parts (the Signer, the IdempotencyKeys) under the app key MUSIC.
- `download`: GET/HEAD /media/{object_key}, served from the bucket through a signed link.
"""
