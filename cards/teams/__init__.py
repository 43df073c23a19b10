"""Teams' card format: Adaptive Cards 1.5, their size limit and escaping filters."""
