"""Object storage for hosted media (arrives with music generation).

A leaf package: it imports nothing from gateway, ledger or simulator.

- `objects`: ObjectStore, the private-bucket S3 client (aiobotocore), and StoredObject.
- `deletion`: DeleteObjects batching and the reading of its per-key answers (DeleteResult).
- `errors`: StorageError, the one exception raised for any S3 failure.
- `ranges`: RFC 9110 Range / If-Range evaluation (pure).
- `preconditions`: ETag comparison for If-None-Match and If-Range (pure).
- `byteranges`: multipart/byteranges framing and its length (pure).
- `serving`: serve_object, conditional GET/HEAD with ranges, streamed from S3.
- `multipart`: a local file put in the bucket, in parts when large.
- `files`: FileStore, files kept for organizations, in the bucket or a local directory.
- `settings`: StorageSettings, the [storage] keys the gateway and the sweeper share, and
  open_store, the configured bucket's ObjectStore (or None).
"""
