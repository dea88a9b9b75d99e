"""Object storage for hosted media (arrives with music generation)."""
