"""Audio: speech (text to audio) and transcription (multipart audio upload to text).

- `speech`: POST /v1/audio/speech, the audio relayed as the provider produces it.
- `transcription`: POST /v1/audio/transcriptions, the upload streamed to the provider, billed.
- `upload`: the client's multipart upload, passed on as it arrives.
- `routes`: the handlers of both routes and their endpoints.
"""
