"""The web's card format: HTML fragments for the approval page."""
