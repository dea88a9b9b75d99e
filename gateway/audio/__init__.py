"""Audio: speech (text to audio) and transcription (multipart audio upload to text)."""
