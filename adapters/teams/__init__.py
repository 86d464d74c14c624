"""Microsoft Teams: `app` serves and authenticates, `bot` turns activities into conversation messages, `render`
builds Teams markdown, the citation entity and the sources card."""
from adapters.teams.app import TeamsConfig, build_teams_app, run_teams

__all__ = ["TeamsConfig", "build_teams_app", "run_teams"]
