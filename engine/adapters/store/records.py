"""Plain records: API tokens (hashed), stored workflows, the demo ledger, gate overrides with
their audit trail."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase
from engine.domain.errors import Conflict, NotFound
from engine.domain.model import ApiToken, Role


def token_from_row(row: Any) -> ApiToken:
    return ApiToken(
        name=row["name"],
        role=Role(row["role"]),
        person=row["person"],
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
        last_used_at=row["last_used_at"],
    )


class RecordStore(StoreBase):
    async def schema_revision(self) -> str | None:
        """The migration the database is at (None: never migrated). Raises when unreachable.
        Read without Alembic (``revision``): every command asks this before it acts."""
        from engine.adapters.store.revision import current_revision

        async with self.db.engine.connect() as conn:
            revision: str | None = await conn.run_sync(current_revision)
            return revision

    # -- API tokens --------------------------------------------------------------------------

    async def create_token(
        self, name: str, role: Role, person: str | None, token_hash: str, now: datetime
    ) -> ApiToken:
        def work(conn: Connection) -> ApiToken:
            stmt = (
                self.insert_ignore(t.api_tokens)
                .values(
                    name=name,
                    role=role.value,
                    person=person,
                    token_hash=token_hash,
                    created_at=now,
                )
                .on_conflict_do_nothing(index_elements=["name"])
            )
            if not (conn.execute(stmt)).rowcount:
                raise Conflict(f"a token named {name!r} already exists", name=name)
            row = (
                (conn.execute(select(t.api_tokens).where(t.api_tokens.c.name == name)))
                .mappings()
                .one()
            )
            return token_from_row(row)

        return await self.db.transact(work)

    async def token_by_hash(self, token_hash: str) -> ApiToken | None:
        def work(conn: Connection) -> ApiToken | None:
            row = (
                (
                    conn.execute(
                        select(t.api_tokens).where(
                            t.api_tokens.c.token_hash == token_hash,
                            t.api_tokens.c.revoked_at.is_(None),
                        )
                    )
                )
                .mappings()
                .one_or_none()
            )
            return None if row is None else token_from_row(row)

        return await self.db.transact(work, write=False)

    async def list_tokens(self) -> list[ApiToken]:
        def work(conn: Connection) -> list[ApiToken]:
            q = select(t.api_tokens).order_by(t.api_tokens.c.created_at)
            return [token_from_row(r) for r in (conn.execute(q)).mappings()]

        return await self.db.transact(work, write=False)

    async def revoke_token(self, name: str, now: datetime) -> None:
        def work(conn: Connection) -> None:
            res = conn.execute(
                update(t.api_tokens)
                .where(t.api_tokens.c.name == name, t.api_tokens.c.revoked_at.is_(None))
                .values(revoked_at=now)
            )
            if not res.rowcount:
                raise NotFound(f"no active token named {name!r}", name=name)

        await self.db.transact(work)

    # -- stored workflows ----------------------------------------------------------------------

    async def put_workflow(
        self, name: str, definition: dict[str, Any], by: str, now: datetime
    ) -> bool:
        """Store a workflow definition (JSON as posted). Returns True when it is new."""

        def work(conn: Connection) -> bool:
            res = conn.execute(
                update(t.workflows)
                .where(t.workflows.c.name == name)
                .values(definition=definition, updated_at=now, created_by=by)
            )
            if res.rowcount:
                return False
            conn.execute(
                insert(t.workflows).values(
                    name=name,
                    definition=definition,
                    created_by=by,
                    created_at=now,
                    updated_at=now,
                )
            )
            return True

        return await self.db.transact(work)

    async def stored_workflows(self) -> dict[str, dict[str, Any]]:
        def work(conn: Connection) -> dict[str, dict[str, Any]]:
            rows = conn.execute(select(t.workflows.c.name, t.workflows.c.definition))
            return {name: definition for name, definition in rows.all()}

        return await self.db.transact(work, write=False)

    async def stored_workflow(self, name: str) -> dict[str, Any] | None:
        def work(conn: Connection) -> dict[str, Any] | None:
            row = conn.execute(select(t.workflows.c.definition).where(t.workflows.c.name == name))
            return row.scalar_one_or_none()

        return await self.db.transact(work, write=False)

    # -- the demo ledger -----------------------------------------------------------------------

    async def record_ledger(
        self,
        connector: str,
        action: str,
        args: dict[str, Any],
        idempotency_key: str,
        now: datetime,
        *,
        run_id: str | None = None,
        step_id: str | None = None,
    ) -> int:
        def work(conn: Connection) -> int:
            res = conn.execute(
                insert(t.ledger)
                .values(
                    connector=connector,
                    action=action,
                    args=args,
                    idempotency_key=idempotency_key,
                    run_id=run_id,
                    step_id=step_id,
                    at=now,
                )
                .returning(t.ledger.c.id)
            )
            return int(res.scalar_one())

        return await self.db.transact(work)

    async def ledger(self, *, run_id: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        def work(conn: Connection) -> list[dict[str, Any]]:
            q = select(t.ledger).order_by(t.ledger.c.id).limit(limit)
            if run_id is not None:
                q = q.where(t.ledger.c.run_id == run_id)
            return [dict(r) for r in (conn.execute(q)).mappings()]

        return await self.db.transact(work, write=False)

    # -- gate overrides and the audit log ------------------------------------------------------

    async def set_gate_override(
        self,
        scope: str,
        scope_key: str,
        setting: str,
        value: Any,
        actor: str,
        now: datetime,
    ) -> Any:
        """Set (or, with ``value=None``, remove) one override; audited in the same transaction.
        Returns the old value."""

        def work(conn: Connection) -> Any:
            go = t.gate_overrides
            key = (go.c.scope == scope, go.c.scope_key == scope_key, go.c.setting == setting)
            old = (conn.execute(select(go.c.value).where(*key))).scalar_one_or_none()
            conn.execute(delete(go).where(*key))
            if value is not None:
                conn.execute(
                    insert(go).values(
                        scope=scope,
                        scope_key=scope_key,
                        setting=setting,
                        value=value,
                        updated_by=actor,
                        updated_at=now,
                    )
                )
            target = f"gate.{setting}" + (f"[{scope}={scope_key}]" if scope != "global" else "")
            conn.execute(
                insert(t.audit_log).values(
                    at=now, actor=actor, action="gate.set", target=target, old=old, new=value
                )
            )
            return old

        return await self.db.transact(work)

    async def gate_overrides(self) -> list[dict[str, Any]]:
        def work(conn: Connection) -> list[dict[str, Any]]:
            q = select(t.gate_overrides)
            return [dict(r) for r in (conn.execute(q)).mappings()]

        return await self.db.transact(work, write=False)

    async def audit(
        self, actor: str, action: str, target: str, old: Any, new: Any, now: datetime
    ) -> None:
        def work(conn: Connection) -> None:
            conn.execute(
                insert(t.audit_log).values(
                    at=now, actor=actor, action=action, target=target, old=old, new=new
                )
            )

        await self.db.transact(work)

    async def audit_log(self, limit: int = 200) -> list[dict[str, Any]]:
        def work(conn: Connection) -> list[dict[str, Any]]:
            q = select(t.audit_log).order_by(t.audit_log.c.id.desc()).limit(limit)
            return [dict(r) for r in (conn.execute(q)).mappings()]

        return await self.db.transact(work, write=False)
