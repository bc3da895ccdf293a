"""siftbus."""
