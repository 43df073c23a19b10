"""``python -m bot.cli``: the ``signoff`` command."""

from bot.cli import main

raise SystemExit(main())
