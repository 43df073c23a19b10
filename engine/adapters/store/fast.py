"""The hot path's statements, run on the SQLite driver itself.

In the engine's units SQLAlchemy's execution layer costs several times what sqlite3 does for
the same statement (measured: a one-row SELECT by key, 45 us through ``Connection.execute``
and 8 us on the sqlite3 connection; an append's UPDATE and INSERT lose more, to bind and
result processing, events and result objects). The statements a run takes on every step
(create, read, append, park, decide) are therefore compiled by SQLAlchemy once per shape of
parameters, with its own bind and result processors, and executed on the DBAPI connection of
the unit's transaction: same SQL, same types, same transaction, same error classes.
PostgreSQL runs them through ``Connection.execute`` as before.

Only constant statements belong here (module-level or cached per shape): a statement is
compiled once for the life of the object.
"""

from __future__ import annotations

import json
import numbers
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import JSON
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DBAPIError

Params = Mapping[str, Any]


class FastResult:
    """The part of ``CursorResult`` the store's units use, over rows already fetched."""

    __slots__ = ("keys", "rowcount", "rows")

    def __init__(self, keys: Sequence[str], rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self.keys = keys
        self.rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.rows)

    def mappings(self) -> _Mappings:
        return _Mappings(self)

    def scalars(self) -> Iterator[Any]:
        return (row[0] for row in self.rows)

    def first(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None

    def scalar_one_or_none(self) -> Any:
        if len(self.rows) > 1:
            raise AssertionError("more than one row")
        return self.rows[0][0] if self.rows else None

    def scalar_one(self) -> Any:
        if len(self.rows) != 1:
            raise AssertionError(f"{len(self.rows)} rows, expected one")
        return self.rows[0][0]


class _Mappings:
    __slots__ = ("_result",)

    def __init__(self, result: FastResult) -> None:
        self._result = result

    def __iter__(self) -> Iterator[dict[str, Any]]:
        keys = self._result.keys
        return (dict(zip(keys, row, strict=True)) for row in self._result.rows)

    def first(self) -> dict[str, Any] | None:
        return next(iter(self), None)

    def one_or_none(self) -> dict[str, Any] | None:
        rows = list(self)
        if len(rows) > 1:
            raise AssertionError(f"{len(rows)} rows, expected at most one")
        return rows[0] if rows else None

    def one(self) -> dict[str, Any]:
        rows = list(self)
        if len(rows) != 1:
            raise AssertionError(f"{len(rows)} rows, expected one")
        return rows[0]

    def all(self) -> list[dict[str, Any]]:
        return list(self)


class _Compiled:
    """One statement compiled for SQLite with one set of parameter names."""

    __slots__ = ("binds", "fixed", "keys", "names", "processed", "sql")

    def __init__(self, stmt: Any, dialect: Dialect, keys: Sequence[str] | None) -> None:
        compiled = stmt.compile(dialect=dialect, column_keys=list(keys) if keys else None)
        # (``postfetch``, columns set by SQL expressions, only matters to the ORM.)
        # An expanding IN (a list bound as one parameter) is rendered per execution.
        if not compiled.positional or compiled.update_prefetch or compiled.post_compile_params:
            raise _Unsupported()
        # Literal values inside the statement (``event == 'step_started'``) and scalar column
        # defaults of an INSERT (SQLAlchemy fills both in at execution).
        fixed: dict[str, Any] = {
            name: bind.effective_value
            for name, bind in compiled.binds.items()
            if not bind.required and bind.callable is None
        }
        for column in compiled.insert_prefetch:
            default = column.default
            if default is None or not default.is_scalar:
                raise _Unsupported()
            fixed[column.key] = default.arg
        processors = compiled._bind_processors
        direct = dialect._json_serializer is None and dialect._json_deserializer is None
        self.sql: str = compiled.string
        self.names: tuple[str, ...] = tuple(compiled.positiontup or ())
        self.fixed = fixed
        self.binds: tuple[tuple[str, Callable[[Any], Any] | None], ...] = tuple(
            (
                name,
                _json_bind(processors[name])
                if direct and isinstance(compiled.binds[name].type, JSON)
                else processors.get(name),
            )
            for name in self.names
        )
        self.keys: tuple[str, ...] = tuple(c.keyname for c in compiled._result_columns)
        # The result columns that need converting (JSON, timestamps), by position.
        self.processed: tuple[tuple[int, Callable[[Any], Any]], ...] = tuple(
            (i, _json_result if direct and isinstance(c.type, JSON) else process)
            for i, c in enumerate(compiled._result_columns)
            if (process := c.type._cached_result_processor(dialect, None)) is not None
        )

    def args(self, params: Params) -> tuple[Any, ...]:
        if self.fixed:
            params = {**self.fixed, **params}
        return tuple(
            [
                value if process is None or value is None else process(value)
                for name, process in self.binds
                for value in (params[name],)
            ]
        )

    def rows(self, cursor: sqlite3.Cursor) -> list[tuple[Any, ...]]:
        fetched = cursor.fetchall()
        processed = self.processed
        if not processed:
            return fetched
        rows = []
        for fetched_row in fetched:
            row = list(fetched_row)
            for i, process in processed:
                value = row[i]
                if value is not None:
                    row[i] = process(value)
            rows.append(tuple(row))
        return rows


# JSON values take the json module's encoder and decoder directly: what SQLAlchemy's SQLite
# JSON processors call through three frames (its processor, ``json.dumps``' keyword checks,
# the encoder), for the same text either way. Everything else the store binds to a JSON
# column (its ``JSON.NULL`` and ``null()``) goes to SQLAlchemy's processor as before.
_PLAIN_JSON = frozenset({dict, list, str, int, float, bool})
_encode = json.JSONEncoder().encode
_decode = json.JSONDecoder().decode


def _json_bind(sqlalchemys: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def process(value: Any) -> Any:
        if value.__class__ in _PLAIN_JSON:
            return _encode(value)
        return sqlalchemys(value)

    return process


def _json_result(value: Any) -> Any:
    try:
        return _decode(value)
    except TypeError:  # SQLite's JSON number stored as one (SQLAlchemy's SQLite JSON type)
        if isinstance(value, numbers.Number):
            return value
        raise


class _Unsupported(Exception):
    """A statement this path does not run (an expanding IN, non-scalar column defaults,
    onupdate values): it goes through ``Connection.execute``."""


class Fast:
    """A constant Core statement: compiled once per parameter shape, run on sqlite3."""

    __slots__ = ("_compiled", "_slow", "stmt")

    def __init__(self, stmt: Any) -> None:
        self.stmt = stmt
        self._compiled: dict[tuple[str, ...] | None, _Compiled] = {}
        self._slow = False

    def __call__(self, conn: Connection, params: Params | Sequence[Params]) -> Any:
        """``conn.execute(stmt, params)``: a list of parameter sets is an executemany."""
        if self._slow or conn.dialect.name != "sqlite":
            return conn.execute(self.stmt, params)
        many = not isinstance(params, Mapping)
        batch: Sequence[Params] = params if many else [params]  # type: ignore[assignment,list-item]
        first = batch[0]
        shape = tuple(first) if self.stmt.is_dml and self.stmt.is_insert else None
        compiled = self._compiled.get(shape)
        if compiled is None:
            try:
                compiled = self._compiled[shape] = _Compiled(self.stmt, conn.dialect, shape)
            except _Unsupported:
                self._slow = True
                return conn.execute(self.stmt, params)
        # pysqlite's DBAPI connection is the sqlite3 connection itself (``driver_connection``
        # gets it through three more calls per statement).
        driver = conn.connection.dbapi_connection
        assert isinstance(driver, sqlite3.Connection)
        try:
            if many:
                cursor = driver.executemany(compiled.sql, [compiled.args(p) for p in batch])
                return FastResult((), [], cursor.rowcount)
            cursor = driver.execute(compiled.sql, compiled.args(first))
            rows = compiled.rows(cursor) if compiled.keys else []
            return FastResult(compiled.keys, rows, cursor.rowcount)
        except sqlite3.Error as exc:
            # The exception SQLAlchemy would raise: transact retries busy, callers catch
            # IntegrityError.
            raise DBAPIError.instance(
                compiled.sql, None, exc, sqlite3.Error, dialect=conn.dialect
            ) from exc
