"""Batches: OpenAI's Batch API and Anthropic's Message Batches, and the files they read and write.

- `files`: kept files (OpenAI's Files API): uploads streamed to disk, kept in the FileStore,
  recorded in the ledger (FileStored, FileDeleted); what the routes and the batch engine call.
- `file_routes`: POST/GET /v1/files, GET/DELETE /v1/files/{id}, GET /v1/files/{id}/content.
- `routes`: /v1/batches and /v1/messages/batches; `service`: what they do; `shapes`: a batch as
  each API shows it.
- `endpoints`: the routes a line may be for, as their single routes read them; `lines`: an input
  read and checked line by line; `creation`: a batch checked, its worst case held, recorded.
- `running`: one process runs every batch while it has the ledger's turn; `gateway_run`: lines
  through their single routes; `native`: a provider's own batch API; `progress`: what both share;
  `purse`: the batch's hold as its lines draw from it; `finishing`: output files, the batch ended.
"""
