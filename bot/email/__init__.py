"""The email channel (the outbound part is another branch; this holds its inbound part)."""
