"""Bad input, fuzzing and the error boundary, over every route."""
