"""Builds the pieces from the settings: the one place that knows how they fit together."""
from __future__ import annotations

import logging
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.conversation import Conversation
from bot.settings import Settings, SettingsError
from core.abstain import EXEMPLAR_KIND, AbstentionModel, AbstentionPolicy, Strictness, load_exemplars
from core.assistant import Assistant, Generator
from core.claims import ACTOR_DEFINITIONS, actor_terms
from core.audit import AuditLog
from core.dense import REGULATION_KINDS, Entry, VectorCollection, fingerprint, open_chroma, provision_entries
from core.embedding import Embedder
from core.documents import DocumentLibrary
from core.extractive import ExtractiveGenerator
from core.fair_use import FairUse, SharedFairUse
from core.language import detect_language
from core.lexical import LexicalIndexes
from core.library import Documents
from core.llm import GroqGenerator, chat_groq
from core.metrics import Metrics
from core.models import Mode
from core.provisions import ProvisionStore
from core.rerank import CrossEncoderReranker, FusedOrder, Reranker
from core.retrieval import RetrievalConfig, Retriever
from core.storage import Storage, open_storage
from core.verify import Verifier
from corpus import LANGUAGES, is_current
from corpus.guide import Guides

if TYPE_CHECKING:
    from adapters.slack import SlackConfig
    from adapters.teams import TeamsConfig

log = logging.getLogger(__name__)

REGULATION_COLLECTION = "gdpr-regulation-en"
AUDIT_SPOOL_NAME = "audit-spool.jsonl"


class NotReady(Exception):
    """The corpus or the index is missing; the message says which command builds it."""


def selected_languages(settings: Settings) -> tuple[str, ...]:
    if settings.languages.strip().lower() == "all":
        return LANGUAGES
    chosen = tuple(l.strip().lower() for l in settings.languages.split(",") if l.strip())
    unknown = [l for l in chosen if l not in LANGUAGES]
    if unknown:
        raise NotReady(f"GDPRBOT_LANGUAGES has unknown language(s) {unknown}; valid: {', '.join(LANGUAGES)}")
    return chosen


def ensure_corpus(settings: Settings) -> Path:
    """Build the provision corpus into the data dir when it is not there yet, or was built by an older version."""
    from corpus.build_gdpr_corpus import main as build_corpus

    languages = sorted(set(selected_languages(settings)) | {"en"})
    if is_current(settings.corpus_dir, languages):
        return settings.corpus_dir
    log.info("Building the provision corpus into %s", settings.corpus_dir)
    argv = ["--out", str(settings.corpus_dir), "--lang", ",".join(languages)]
    if settings.source_dir is not None:
        argv += ["--source", str(settings.source_dir)]
    if build_corpus(argv) != 0:
        raise NotReady("The provision corpus could not be built (see the message above).")
    return settings.corpus_dir


def slack_config(settings: Settings) -> SlackConfig:
    # Imported here: the terminal never loads the Slack SDK.
    from adapters.slack import SlackConfig

    if not settings.slack_bot_token:
        raise SettingsError("Missing setting SLACK_BOT_TOKEN: the bot token (xoxb-…) is required for Slack")
    return SlackConfig(bot_token=settings.slack_bot_token, signing_secret=settings.slack_signing_secret,
                       app_token=settings.slack_app_token, api_url=settings.slack_api_url,
                       streaming=bool(settings.groq_api_key))


def teams_config(settings: Settings) -> TeamsConfig:
    from adapters.teams import TeamsConfig

    return TeamsConfig(app_id=settings.microsoft_app_id, app_password=settings.microsoft_app_password,
                       app_type=settings.microsoft_app_type, tenant_id=settings.microsoft_app_tenant_id,
                       streaming=bool(settings.groq_api_key))


class Components:
    """Lazily built, shared pieces of one running assistant."""

    def __init__(self, settings: Settings):
        self.settings = settings

    @cached_property
    def store(self) -> ProvisionStore:
        ensure_corpus(self.settings)
        return ProvisionStore(self.settings.corpus_dir, selected_languages(self.settings))

    @cached_property
    def embedder(self) -> Embedder:
        return Embedder(self.settings.embedding_model)

    @cached_property
    def chroma(self):
        return open_chroma(self.settings.index_dir, self.settings.chroma_host, self.settings.chroma_port)

    @cached_property
    def reranker(self) -> Reranker:
        if self.settings.reranker_model:
            return CrossEncoderReranker(self.settings.reranker_model)
        return FusedOrder()

    def prepare(self) -> Retriever:
        """Build or open the corpus and the index and warm the search up, before anyone asks."""
        return self.retriever

    @cached_property
    def guides(self) -> Guides:
        guides = Guides()
        # Without the English guide, retrieval quality drops to the naive baseline: refuse, don't degrade.
        if not guides.files("en"):
            raise NotReady(f"The English provision guides are missing from {guides.directory}; reinstall the package.")
        return guides

    def dense_index(self, *, rebuild: bool = False, progress: bool = False) -> VectorCollection:
        index = VectorCollection(self.chroma, self.embedder, REGULATION_COLLECTION)
        if index.ensure(self.dense_entries, rebuild=rebuild, progress=progress):
            log.info("Embedded %d entries of the Regulation into %s", len(self.dense_entries), index.name)
        return index

    def lexical_indexes(self, *, rebuild: bool = False, progress: bool = False) -> LexicalIndexes:
        def languages(langs):
            if not progress:
                return iter(langs)
            from tqdm import tqdm

            return tqdm(langs, unit="language", desc="BM25 indexes")

        return LexicalIndexes.open(self.store, self.guides, self.settings.index_dir / "lexical", rebuild=rebuild,
                                   progress=languages)

    @cached_property
    def retriever(self) -> Retriever:
        # The language model's unpacking needs twice its size for a moment: while little else is loaded, that
        # moment is not the process's peak.
        detect_language("What is personal data?")
        index = self.dense_index()
        retriever = Retriever(self.store, index.matrix(REGULATION_KINDS), self.embedder, self.reranker,
                              RetrievalConfig(), self.lexical, index.matrix([EXEMPLAR_KIND]))
        retriever.warm_up()
        return retriever

    @cached_property
    def corpus_version(self) -> str:
        """The consolidated text the answers quote, and a fingerprint of the built corpus."""
        return f"02016R0679-20160504 (corrigenda 2018) {fingerprint(self.dense_entries)}"

    @cached_property
    def dense_entries(self) -> list[Entry]:
        exemplars = [Entry(e.key, EXEMPLAR_KIND, self.lexical.english_reading(e.question, e.lang))
                     for e in load_exemplars()]
        return provision_entries(self.store.provisions("en"), self.guides.lines("en"), self.embedder) + exemplars

    @cached_property
    def lexical(self) -> LexicalIndexes:
        return self.lexical_indexes()

    @cached_property
    def storage(self) -> Storage:
        """The embedded files under the data dir, or the database of DATABASE_URL (raises StorageUnavailable)."""
        return open_storage(self.settings.data_dir, self.settings.database_url)

    @cached_property
    def metrics(self) -> Metrics:
        metrics = Metrics()
        metrics.set_index_info(self.corpus_version, self.embedder.model_id)
        metrics.watch_health({"audit": lambda: self.audit.health(), "storage": lambda: self.storage.health()})
        return metrics

    @cached_property
    def audit(self) -> AuditLog:
        """Spooled, where the store cannot take a row, on this machine's disk (each replica has its own)."""
        return AuditLog(self.storage.audit, spool_path=self.settings.data_dir / AUDIT_SPOOL_NAME,
                        on_failure=self.metrics.observe_audit_write_failure)

    def close(self) -> None:
        """Stop what was started: the audit trail replays what it can, journals and the database close."""
        if "audit" in self.__dict__:
            self.audit.close()
        if "storage" in self.__dict__:
            self.storage.close()

    @cached_property
    def extractive(self) -> ExtractiveGenerator:
        return ExtractiveGenerator()

    @cached_property
    def generator(self) -> Generator:
        if not self.settings.groq_api_key:
            return self.extractive
        chat = chat_groq(self.settings.groq_api_key, self.settings.groq_model, self.settings.groq_base_url,
                         self.settings.llm_timeout_s)
        return GroqGenerator(chat, self.extractive)

    @cached_property
    def abstention(self) -> AbstentionPolicy:
        strictness = Strictness.LLM if self.generator.mode is Mode.LLM else Strictness.EXTRACTIVE
        return AbstentionPolicy(self.store, AbstentionModel.load(), strictness, self.embedder.model_id)

    @cached_property
    def verifier(self) -> Verifier:
        store = self.store
        return Verifier(lambda lang: actor_terms((store.get(pid, lang).text for pid in ACTOR_DEFINITIONS), lang))

    def assistant(self, **parts) -> Assistant:
        """The answer pipeline on this deployment's index, generator and abstention policy; `parts` add the
        audit trail, fair use, metrics or documents."""
        fallback = self.extractive if self.generator is not self.extractive else None
        return Assistant(self.retriever, self.generator, self.abstention, verifier=self.verifier, fallback=fallback,
                         max_question_chars=self.settings.max_question_chars, **parts)

    @cached_property
    def service(self) -> Assistant:
        """For the shared chat platforms: fair-use limits per user and workspace."""
        s = self.settings
        limits = (s.user_rate_per_min, s.user_burst, s.workspace_rate_per_min, s.workspace_burst)
        buckets = self.storage.buckets
        fair_use = SharedFairUse(buckets, *limits) if buckets is not None else FairUse(*limits)
        return self.assistant(audit=self.audit, fair_use=fair_use, metrics=self.metrics, documents=self.documents)

    @cached_property
    def operator_service(self) -> Assistant:
        """For the terminal: the operator's own machine, so no fair-use limits; answers are still audited."""
        return self.assistant(audit=self.audit, metrics=self.metrics)

    @cached_property
    def conversation(self) -> Conversation:
        """Slack and Teams: questions with fair use, and the workspace's documents; redeliveries, threads and sent
        answers kept in the storage (shared by every replica on Postgres)."""
        storage = self.storage
        return Conversation(self.service, self.documents, deliveries=storage.deliveries, thread_memory=storage.threads,
                            sent_answers=storage.sent_answers)

    @cached_property
    def operator_conversation(self) -> Conversation:
        """The terminal: the operator's own questions; documents are managed in Slack or Teams."""
        return Conversation(self.operator_service)

    @cached_property
    def documents(self) -> Documents:
        s = self.settings
        library = DocumentLibrary(self.chroma, self.embedder, self.storage.shelves)
        return Documents(library, s.admin_ids, max_bytes=int(s.max_upload_mb * 1024 * 1024),
                         max_pages=s.max_upload_pages, max_chars=s.max_upload_chars,
                         max_passages=s.max_upload_passages, parse_timeout_s=s.upload_parse_timeout_s,
                         parse_memory_mb=s.upload_parse_memory_mb)
