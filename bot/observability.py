"""What the HTTP modes expose besides the chat endpoints: `/metrics` and the details of `/healthz`."""
from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from bot.wiring import Components


def metrics_routes(components: Components) -> list[web.RouteDef]:
    async def metrics(_: web.Request) -> web.Response:
        body, content_type = components.metrics.render()
        return web.Response(body=body, headers={"Content-Type": content_type})

    return [web.get("/metrics", metrics)]


def health_details(components: Components) -> Callable[[], dict]:
    """Index loaded and which corpus and model: what an operator checks first when answers look wrong; the storage
    and the audit trail, with `status: degraded` when the database is unreachable, a journal failed or audit rows
    wait in the spool (the process still answers: a probe should alert, not restart it)."""

    def details() -> dict:
        retriever = components.retriever
        storage, audit = components.storage.health(), components.audit.health()
        return {"status": "ok" if storage["ok"] and audit["ok"] else "degraded",
                "index": {"provisions": len(retriever.store.ids), "vectors": retriever.dense.size,
                          "model": components.embedder.model_id, "corpus_version": components.corpus_version},
                "storage": storage, "audit": audit}

    return details
