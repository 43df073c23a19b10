"""Slack's card format: Block Kit messages, their limits and escaping filters."""
