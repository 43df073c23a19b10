"""Connectors: named integrations the interpreter and held calls invoke. Each takes a
``ConnectorCall`` carrying the idempotency key ``{run_id}:{step_id}:{attempt}``. The lookup by
name the services use is ``engine.services.connectors.ConnectorRegistry``."""
