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
    """Index loaded and which corpus and model: what an operator checks first when answers look wrong."""

    def details() -> dict:
        retriever = components.retriever
        return {"index": {"provisions": len(retriever.store.ids), "vectors": retriever.dense.size,
                          "model": components.embedder.model_id, "corpus_version": components.corpus_version}}

    return details
