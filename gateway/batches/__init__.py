"""Batches: OpenAI's Batch API and Anthropic's Message Batches, and the files they read and write.

- `files`: kept files (OpenAI's Files API): uploads streamed to disk, kept in the FileStore,
  recorded in the ledger (FileStored, FileDeleted); what the routes and the batch engine call.
- `file_routes`: POST/GET /v1/files, GET/DELETE /v1/files/{id}, GET /v1/files/{id}/content.
"""
