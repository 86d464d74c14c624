"""The storage layer against a real Chroma server (`chroma run`) through HttpClient."""
from __future__ import annotations

from core.dense import Entry, VectorCollection


def test_collection_with_explicit_embeddings_add_query_reopen(chroma_server, components):
    client = chroma_server.client()
    entries = [Entry("Art. 33(1)", "text", "notify the supervisory authority of a personal data breach within 72 hours"),
               Entry("Art. 17(1)", "text", "the right to obtain erasure of personal data without undue delay")]
    collection = VectorCollection(client, components.embedder, "server-test")
    assert collection.ensure(entries) is True
    hits = collection.search(components.embedder.embed_one("we got hacked, when do we tell the regulator?"))
    assert max(hits["text"], key=hits["text"].get) == "Art. 33(1)"

    reopened = VectorCollection(chroma_server.client(), components.embedder, "server-test")
    assert reopened.ensure(entries) is False and reopened.size == 2
    stored = client.get_collection("server-test")
    assert stored.metadata["model"] == components.embedder.model_id
